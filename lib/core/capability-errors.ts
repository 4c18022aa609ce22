import { WorkhorseError } from './errors';

/**
 * The worker capability does not reach this (SQLSTATE `P1040`): a worker asked for the
 * dependencies of a job it does not hold under a live lease and fence, or reported or
 * unregistered a registry row it did not register. Nothing was read or written.
 */
export class NotYoursError extends WorkhorseError {
  constructor(
    /** What was reached for: `jobId` or `workerId`. */
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}
