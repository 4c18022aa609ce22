import { WorkhorseValidationError } from './errors';
import type { PerKeyLimit, QueuePolicy, RateLimit } from './types';
import { checkInteger } from './validation';

/** The bounds `set_queue_policy_v1` enforces (the dashboard's inputs, the Nest module's options). */
export const POLICY_LIMITS = { concurrency: 100_000, rateLimit: 100_000, intervalMs: 86_400_000, perKeyConcurrency: 100_000 } as const;

/**
 * A policy as `set_queue_policy_v1` takes it, which checks it (fields, bounds, errors naming the
 * field). A number JSON cannot carry (NaN, Infinity) travels as text, so it is refused by name
 * rather than read as null (no limit).
 */
export function policyJson(policy: unknown): string {
  return JSON.stringify(policy === undefined ? null : policy, (_key, value: unknown) =>
    typeof value === 'number' && !Number.isFinite(value) ? String(value) : value === undefined ? null : value);
}

function checkKeys(value: object, field: string, keys: readonly string[]): void {
  const what = field === '' ? 'queue policy' : field === 'perKey' ? 'per-key limit' : 'rate limit';
  for (const key of Object.keys(value)) {
    if (!keys.includes(key)) {
      throw new WorkhorseValidationError(field === '' ? key : `${field}.${key}`, `is not a ${what} field (${keys.join(', ')})`);
    }
  }
}

function checkPerKey(value: unknown): PerKeyLimit | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new WorkhorseValidationError('perKey', 'must be an object { concurrency } or null');
  }
  checkKeys(value, 'perKey', ['concurrency']);
  return { concurrency: checkInteger((value as Partial<PerKeyLimit>).concurrency, 'perKey.concurrency', 1, POLICY_LIMITS.perKeyConcurrency) };
}

function checkRateLimit(value: unknown): RateLimit | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new WorkhorseValidationError('rateLimit', 'must be an object { limit, intervalMs } or null');
  }
  checkKeys(value, 'rateLimit', ['limit', 'intervalMs']);
  const rate = value as Partial<RateLimit>;
  return {
    limit: checkInteger(rate.limit, 'rateLimit.limit', 1, POLICY_LIMITS.rateLimit),
    intervalMs: checkInteger(rate.intervalMs, 'rateLimit.intervalMs', 1, POLICY_LIMITS.intervalMs),
  };
}

/**
 * Checks a queue policy where no database is at hand (`WorkhorseModule.forRoot({ queues })`,
 * refused before connecting), by the rules `set_queue_policy_v1` applies, which checks it again.
 */
export function checkQueuePolicy(value: unknown): Required<QueuePolicy> {
  if (value === null || value === undefined) return { concurrency: null, rateLimit: null, perKey: null };
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new WorkhorseValidationError('policy', 'must be an object { concurrency?, rateLimit?, perKey? } or null');
  }
  checkKeys(value, '', ['concurrency', 'rateLimit', 'perKey']);
  const policy = value as QueuePolicy;
  return {
    concurrency:
      policy.concurrency === undefined || policy.concurrency === null
        ? null
        : checkInteger(policy.concurrency, 'concurrency', 1, POLICY_LIMITS.concurrency),
    rateLimit: checkRateLimit(policy.rateLimit),
    perKey: checkPerKey(policy.perKey),
  };
}
