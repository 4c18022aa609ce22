import type { PoolClient } from 'pg';
import { fromPgError, LeaseLostError, WorkhorseValidationError } from './errors';
import type { JsonValue, Queryable } from './types';
import { toJsonText } from './validation';

/** What the worker tells a context about the job it runs. */
export interface ClaimedJob {
  jobId: string;
  queue: string;
  type: string;
  attempt: number;
  maxAttempts: number;
  fenceToken: string;
  workerId: string;
  /** Checkpoints stored by earlier runs: name -> [] (undefined) or [value]. */
  checkpoints: Record<string, [] | [JsonValue]>;
}

/**
 * What a handler gets besides its payload: who it is, an `AbortSignal` that fires on cancel,
 * lease loss or shutdown, and durable checkpoints.
 *
 * @example
 * worker.handle('order.fulfill', async (payload: { orderId: string }, ctx) => {
 *   const charge = await ctx.checkpoint('charge', () => chargeCard(payload.orderId));
 *   return { chargeId: charge.chargeId, attempt: ctx.attempt };
 * });
 */
export class HandlerContext {
  /** The job's id. */
  readonly jobId: string;
  /** This attempt's number, from 1. */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly queue: string;
  readonly type: string;
  readonly workerId: string;
  /** Aborts when the job is canceled, the lease is lost or the worker shuts down. */
  readonly signal: AbortSignal;
  /**
   * In a transactional handler (`handle(type, fn, { transactional: true })`): the client of the
   * transaction that also records the job's completion. Write through it and those writes
   * commit exactly when the job succeeds. Undefined for ordinary handlers.
   */
  readonly client: PoolClient | undefined;

  constructor(
    private readonly job: ClaimedJob,
    signal: AbortSignal,
    private readonly runner: Queryable,
    private readonly onStale: () => void,
    client?: PoolClient,
  ) {
    this.client = client;
    this.jobId = job.jobId;
    this.attempt = job.attempt;
    this.maxAttempts = job.maxAttempts;
    this.queue = job.queue;
    this.type = job.type;
    this.workerId = job.workerId;
    this.signal = signal;
  }

  /**
   * Runs `operation` once per job: its result is stored under `name`, and when the handler runs
   * again (after a crash, a retry or a durable sleep) the stored result is returned instead of
   * running the operation again. The result must be JSON (at most 1 MiB); `undefined` is kept.
   * Throws {@link LeaseLostError} if this worker no longer owns the job.
   */
  async checkpoint<T>(name: string, operation: () => T | Promise<T>): Promise<T> {
    if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
      throw new WorkhorseValidationError('name', 'must be a string of 1 to 200 characters');
    }
    const stored = this.job.checkpoints[name];
    if (stored) return stored[0] as T;
    this.signal.throwIfAborted();
    const value = await operation();
    const text = value === undefined ? null : toJsonText(value, `checkpoint ${JSON.stringify(name)}`);
    let status: string;
    try {
      const result = await this.runner.query(
        'SELECT workhorse.save_checkpoint_v1($1, $2, $3, $4, $5::jsonb) AS status',
        [this.job.jobId, this.job.workerId, this.job.fenceToken, name, text],
      );
      status = (result.rows[0] as { status: string }).status;
    } catch (error) {
      throw fromPgError(error);
    }
    if (status === 'stale') {
      this.onStale();
      throw new LeaseLostError(this.job.jobId);
    }
    this.job.checkpoints[name] = value === undefined ? [] : [JSON.parse(text as string) as JsonValue];
    return value;
  }

  /**
   * Reports progress (any JSON, at most 64 KiB), visible in `admin.getJob(id).progress` and kept
   * on the outcome when the job ends. Each call replaces the last value. Throws
   * {@link LeaseLostError} if this worker no longer owns the job.
   *
   * @example
   * await ctx.setProgress({ done: 40, total: 100 });
   */
  async setProgress(value: unknown): Promise<void> {
    const text = toJsonText(value, 'progress');
    if (Buffer.byteLength(text, 'utf8') > 65536) {
      throw new WorkhorseValidationError('progress', 'is larger than the 64 KiB limit (65536 bytes of JSON)');
    }
    let status: string;
    try {
      const result = await this.runner.query('SELECT workhorse.set_progress_v1($1, $2, $3, $4::jsonb) AS status', [
        this.job.jobId,
        this.job.workerId,
        this.job.fenceToken,
        text,
      ]);
      status = (result.rows[0] as { status: string }).status;
    } catch (error) {
      throw fromPgError(error);
    }
    if (status === 'stale') {
      this.onStale();
      throw new LeaseLostError(this.job.jobId);
    }
  }
}
