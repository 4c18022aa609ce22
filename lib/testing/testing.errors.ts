import { WorkhorseError } from '../core/errors';
import type { JobSnapshot } from '../core/types';

/**
 * `waitForJobState` gave up: the job did not reach the wanted state in time, ended in another
 * terminal state, or does not exist. `job` is its last snapshot (null when there is none); the
 * message shows its state, attempt and last error.
 *
 * @example
 * await expect(waitForJobState(app, jobId, 'succeeded')).rejects.toThrow(JobStateError);
 */
export class JobStateError extends WorkhorseError {
  constructor(
    message: string,
    readonly job: JobSnapshot | null,
  ) {
    super(message);
  }
}

/**
 * `drainWorkhorse` timed out with work still due; `due` lists those jobs (empty when only a
 * running handler was left).
 *
 * @example
 * try { await drainWorkhorse(app, { timeoutMs: 2000 }); } catch (e) {
 *   if (e instanceof DrainTimeoutError) console.log(e.due.map((job) => job.type));
 * }
 */
export class DrainTimeoutError extends WorkhorseError {
  constructor(
    message: string,
    readonly due: readonly JobSnapshot[],
  ) {
    super(message);
  }
}
