import type { Pool } from 'pg';
import { SchemaNotInstalledError, SchemaVersionMismatchError } from '../errors';
import { verifySchema } from '../schema';
import type { EventHub } from './event-hub';

/**
 * Before a worker claims anything: waits until the database answers, and fails fast unless it
 * holds the schema this package needs. A worker started without the schema would otherwise fail
 * every round trip and tick for ever, silently when nobody listens to its events; one started
 * before its database is up waits for it instead (each failed attempt is a `worker.error`
 * during `start`, retried with a capped backoff).
 *
 * Resolves true once the schema is verified, false if `signal` aborts first (the worker was
 * stopped meanwhile); rejects with {@link SchemaNotInstalledError} (whose message names the
 * command to run) or {@link SchemaVersionMismatchError}.
 */
export async function waitForSchema(pool: Pool, hub: EventHub, signal: AbortSignal): Promise<boolean> {
  for (let failures = 0; !signal.aborted; failures++) {
    try {
      await verifySchema(pool);
      hub.reportSuccess('start');
      return true;
    } catch (error) {
      if (error instanceof SchemaNotInstalledError || error instanceof SchemaVersionMismatchError) throw error;
      if (signal.aborted) break;
      hub.reportError('start', error as Error);
    }
    await pause(Math.min(5000, 250 * 2 ** failures) * (0.5 + Math.random() / 2), signal);
  }
  return false;
}

/** Waits `ms`, or less if `signal` aborts meanwhile. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
