import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The protocol's limits and defaults, read from `sdk/protocol/limits.json`, the one source every
 * SDK reads (Python ships a copy as package data, Go embeds one). The SQL functions enforce the
 * enqueue and handler limits themselves; this library uses the values to default, type and
 * document its options, and to check the worker options, which never reach the server.
 */
export interface Range {
  readonly min: number;
  readonly max: number;
}

export interface RangeWithDefault extends Range {
  readonly default: number;
}

export interface ProtocolLimits {
  readonly enqueue: {
    readonly nameLength: Range;
    readonly queue: { readonly default: string };
    readonly priority: RangeWithDefault;
    readonly maxAttempts: RangeWithDefault;
    readonly tags: { readonly max: number };
    readonly tagLength: Range;
    readonly idempotencyKeyLength: Range;
    readonly concurrencyKeyLength: Range;
    readonly idempotencyTtlMs: RangeWithDefault;
    readonly dedupeKeyLength: Range;
    readonly dedupeWindowMs: Range;
    readonly executionTimeoutMs: Range;
    readonly dependencies: Range;
    readonly batchSize: { readonly max: number };
    readonly batchBytes: { readonly max: number };
    readonly jsonBytes: { readonly max: number };
    readonly jsonDepth: { readonly max: number };
  };
  readonly retryPolicy: {
    readonly delayMs: Range;
    readonly multiplier: Range;
    readonly default: { readonly kind: 'exponential'; readonly initialMs: number; readonly multiplier: number; readonly maxMs: number; readonly jitter: boolean };
    readonly fixedDelayMsDefault: number;
  };
  readonly handler: { readonly sleepMs: Range; readonly waitTimeoutMs: Range; readonly nameLength: Range };
  /** The years (UTC) of every time the protocol stores or compares. */
  readonly dates: { readonly minYear: number; readonly maxYear: number };
  readonly worker: {
    readonly queues: Range & { readonly default: readonly string[] };
    readonly concurrency: RangeWithDefault;
    readonly roundTrips: RangeWithDefault;
    readonly leaseMs: RangeWithDefault;
    readonly heartbeatMs: Range & { readonly belowLeaseMs: boolean; readonly defaultLeaseDivisor: number };
    readonly pollMs: RangeWithDefault;
    readonly tickMs: RangeWithDefault;
    readonly shutdownTimeoutMs: RangeWithDefault;
    readonly unknownTypeDelayMs: RangeWithDefault;
    readonly workerIdLength: Range;
  };
  /** Awaiting results (`Queue.waitForResult`): the fallback poll, the registration's lifetime, ids per read. */
  readonly results: { readonly pollMs: RangeWithDefault; readonly ttlSeconds: RangeWithDefault; readonly batchSize: { readonly max: number } };
}

/** Where the file is: `sdk/protocol/` of the repository, and of the package (`scripts/build.js` copies it). */
export const LIMITS_FILE = join(__dirname, '..', '..', 'sdk', 'protocol', 'limits.json');

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/** The parsed `limits.json`. */
export const PROTOCOL_LIMITS: ProtocolLimits = deepFreeze(JSON.parse(readFileSync(LIMITS_FILE, 'utf8')) as ProtocolLimits);

/**
 * The message every SDK gives for a heartbeat that is not below the lease (field `heartbeatMs`).
 */
export function heartbeatNotBelowLease(leaseMs: number): string {
  return `must be below leaseMs (${leaseMs}), or every lease lapses before it is renewed; a third of leaseMs is the default`;
}
