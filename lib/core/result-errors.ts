import { JobCanceledError, WorkhorseError } from './errors';

/** A job's stored error envelope, as `job_outcome.error` holds it (see `bounded_error`). */
export interface JobErrorEnvelope {
  name: string;
  message: string;
  stack?: string;
}

/**
 * `queue.waitForResult` for a job that ended `failed` (its attempts ran out, or it failed for
 * good, or its deadline or execution timeout passed): carries the job's stored error envelope.
 *
 * @example
 * try { await queue.waitForResult(id); } catch (e) {
 *   if (e instanceof JobFailedError) console.log(e.jobError.name, e.jobError.message);
 * }
 */
export class JobFailedError extends WorkhorseError {
  readonly state = 'failed';

  constructor(
    readonly jobId: string,
    /** The job's terminal error envelope. */
    readonly jobError: JobErrorEnvelope,
  ) {
    super(`Job ${jobId} failed: ${jobError.name}: ${jobError.message}`);
  }
}

/**
 * `queue.waitForResult` for a job that ended `canceled` (by an operator, a parent's end or a
 * dependency's policy): carries the job's stored envelope (name `Canceled`, the reason as the
 * message). A {@link JobCanceledError}, so one `instanceof` catches both kinds of cancel.
 */
export class JobResultCanceledError extends JobCanceledError {
  readonly state = 'canceled';

  constructor(
    jobId: string,
    /** The job's terminal error envelope. */
    readonly jobError: JobErrorEnvelope,
  ) {
    super(jobId);
    this.name = 'JobResultCanceledError';
    this.message = `Job ${jobId} was canceled: ${jobError.message}`;
  }
}

/**
 * `queue.waitForResult` gave up after `timeoutMs`: the job has not ended yet and keeps running
 * (or waiting); waiting again later answers its result.
 */
export class WaitForResultTimeoutError extends WorkhorseError {
  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
  ) {
    super(`Job ${jobId} did not end within ${timeoutMs} ms; it keeps running.`);
  }
}

/**
 * `queue.waitForResult` for an id this producer cannot read: no such job, or another login role
 * enqueued it (the rule of `queue.getJob`, so nothing is revealed about other roles' jobs), or
 * retention deleted it.
 */
export class JobNotFoundError extends WorkhorseError {
  constructor(readonly jobId: string) {
    super(`Job ${jobId} was not found (or was enqueued by another login role).`);
  }
}
