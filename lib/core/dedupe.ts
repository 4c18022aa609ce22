// The types of deduplication windows (enqueue's `dedupe` option; docs/deduplication.md).

/**
 * A deduplication window: enqueues of one queue, type, mode and `key` share a job.
 * - `throttle`: the first enqueue makes the job and opens a window of `windowMs`; an enqueue
 *   inside the window writes nothing and answers that job (`throttled`).
 * - `debounce`: the job runs once `windowMs` has passed; while it has not started, a later
 *   enqueue replaces what `replace` says and answers it (`debounced`): the last call wins.
 */
export interface DedupeOptions {
  /** 1 to 512 characters; stored hashed. */
  key: string;
  /** 100 ms to 30 days. */
  windowMs: number;
  mode: 'throttle' | 'debounce';
  /**
   * Debounce only: what a later enqueue changes in the waiting job: its `payload`, its run time
   * (`runAt`: now + windowMs) or `both` (default).
   */
  replace?: 'payload' | 'runAt' | 'both';
}

/**
 * What an enqueue did: wrote a new job (`created`), found an idempotent enqueue's job for an
 * exact repeat (`duplicate`), or answered a dedupe key's job (`throttled`, `debounced`).
 */
export type EnqueueOutcome = 'created' | 'duplicate' | 'throttled' | 'debounced';

/** `Queue.enqueueDeduped`'s answer: the job and what the enqueue did. */
export interface EnqueueResult {
  jobId: string;
  outcome: EnqueueOutcome;
}
