/**
 * Helpers for tests of applications that use nestjs-workhorse: run due jobs to the end, wait
 * for a job's state, and list what was enqueued. They take the Nest application (or testing
 * module) and use its `Queue`, `Admin` and `WorkhorseWorker`.
 *
 * @example
 * import { drainWorkhorse, listEnqueued, waitForJobState } from 'nestjs-workhorse/testing';
 */
export { drainWorkhorse, type DrainOptions } from './drain';
export { listEnqueued, type ListEnqueuedFilter } from './list-enqueued';
export { DrainTimeoutError, JobStateError } from './testing.errors';
export { waitForJobState, type WaitForJobStateOptions } from './wait-for-job-state';
