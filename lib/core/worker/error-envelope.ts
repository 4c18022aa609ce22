import type { ErrorEnvelope } from '../types';

/** Turns anything a handler threw into the stored `{ name, message, stack }` envelope. */
export function toErrorEnvelope(thrown: unknown): ErrorEnvelope {
  if (thrown instanceof Error) {
    const envelope: ErrorEnvelope = { name: String(thrown.name || 'Error'), message: String(thrown.message) };
    if (typeof thrown.stack === 'string') envelope.stack = thrown.stack;
    return envelope;
  }
  let message: string;
  try {
    message = typeof thrown === 'string' ? thrown : (JSON.stringify(thrown) ?? String(thrown));
  } catch {
    message = String(thrown);
  }
  return { name: 'NonErrorThrown', message };
}

// PostgreSQL cannot store NUL characters or unpaired surrogates in jsonb; error text is not
// under our control, so make it storable (U+FFFD in their place) instead of refusing it.
function storable(text: string): string {
  return text.replace(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
}

/** The envelope of what a handler threw, as the database will store it. */
export function storedEnvelope(thrown: unknown): ErrorEnvelope {
  const error = toErrorEnvelope(thrown);
  error.name = storable(error.name);
  error.message = storable(error.message);
  if (error.stack !== undefined) error.stack = storable(error.stack);
  return error;
}

/** What a thrown error may say about its retry (`fail_v1`'s options). */
export interface RetryControl {
  /** `retryable: false` on the error: fail the job now, whatever attempts remain. */
  nonRetryable?: boolean;
  /** A valid `retryDelayMs` on the error: the delay before the next attempt. */
  retryDelayMs?: number;
}

/** Reads `retryable` and `retryDelayMs` from a thrown error (see `NonRetryableError`, `RetryAfterError`). */
export function retryControlOf(thrown: unknown): RetryControl {
  const control: RetryControl = {};
  const error = thrown as { retryable?: unknown; retryDelayMs?: unknown } | null;
  if (error && typeof error === 'object') {
    if (error.retryable === false) control.nonRetryable = true;
    const ms = error.retryDelayMs;
    if (typeof ms === 'number' && Number.isInteger(ms) && ms >= 0 && ms <= 604_800_000) control.retryDelayMs = ms;
  }
  return control;
}
