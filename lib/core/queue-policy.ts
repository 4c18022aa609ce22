import { WorkhorseValidationError } from './errors';
import type { QueuePolicy, RateLimit } from './types';
import { checkInteger } from './validation';

/** The bounds `set_queue_policy_v1` enforces too. */
export const POLICY_LIMITS = { concurrency: 100_000, rateLimit: 100_000, intervalMs: 86_400_000 } as const;

function checkKeys(value: object, field: string, keys: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!keys.includes(key)) {
      throw new WorkhorseValidationError(field === '' ? key : `${field}.${key}`, `is not a ${field === '' ? 'queue policy' : 'rate limit'} field (${keys.join(', ')})`);
    }
  }
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
 * Checks a queue policy and returns it with every limit spelled out (null for none), as
 * `set_queue_policy_v1` takes it. A null policy, or one with no limit, removes the queue's policy.
 */
export function checkQueuePolicy(value: unknown): Required<QueuePolicy> {
  if (value === null || value === undefined) return { concurrency: null, rateLimit: null };
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new WorkhorseValidationError('policy', 'must be an object { concurrency?, rateLimit? } or null');
  }
  checkKeys(value, '', ['concurrency', 'rateLimit']);
  const policy = value as QueuePolicy;
  return {
    concurrency:
      policy.concurrency === undefined || policy.concurrency === null
        ? null
        : checkInteger(policy.concurrency, 'concurrency', 1, POLICY_LIMITS.concurrency),
    rateLimit: checkRateLimit(policy.rateLimit),
  };
}
