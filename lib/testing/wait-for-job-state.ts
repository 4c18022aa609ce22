import { setTimeout as sleep } from 'node:timers/promises';
import type { JobSnapshot, JobState } from '../core/types';
import { messages } from '../nest/workhorse.messages';
import { adminOf, type WorkhorseTestTarget } from './target';
import { JobStateError } from './testing.errors';

const TERMINAL: readonly JobState[] = ['succeeded', 'failed', 'canceled'];

/**
 * Options of {@link waitForJobState}.
 *
 * @example
 * await waitForJobState(app, jobId, ['succeeded', 'failed'], { timeoutMs: 30_000, pollMs: 100 });
 */
export interface WaitForJobStateOptions {
  /** Give up after this long, default 10 000 ms. */
  timeoutMs?: number;
  /** How often to look, default 20 ms. */
  pollMs?: number;
}

/**
 * Waits until the job is in one of the given states and returns its snapshot. Fails at once
 * when the job ends in another terminal state (it can never change again), and after
 * `timeoutMs` otherwise, with a {@link JobStateError} whose message shows the job's actual
 * state, attempt and last error. It does not run jobs: the application's worker (or a
 * `drainWorkhorse` call) must. Takes the Nest application, or the core objects
 * (`{ pool }`, `{ queue }` or `{ admin }`).
 *
 * @example
 * const { jobId } = await (await fetch(`${url}/orders`, { method: 'POST' })).json();
 * const job = await waitForJobState(app, jobId, 'succeeded');
 * expect(job.result).toEqual({ shipped: true });
 */
export async function waitForJobState(
  app: WorkhorseTestTarget,
  jobId: string,
  state: JobState | readonly JobState[],
  options: WaitForJobStateOptions = {},
): Promise<JobSnapshot> {
  const admin = adminOf(app);
  const wanted: readonly JobState[] = typeof state === 'string' ? [state] : state;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await admin.getJob(jobId);
    if (job && wanted.includes(job.state)) return job;
    if (job && TERMINAL.includes(job.state)) throw new JobStateError(messages.jobEndedElsewhere(jobId, wanted, job), job);
    if (Date.now() >= deadline) {
      throw new JobStateError(job ? messages.jobStateTimeout(jobId, wanted, timeoutMs, job) : messages.jobNotFound(jobId), job);
    }
    await sleep(options.pollMs ?? 20);
  }
}
