import { WorkhorseError } from './errors';

/**
 * An operator action refused for the job's state (SQLSTATE `P1050`): run now of a running or
 * blocked job, a reschedule of one that started, a delete of a live job or of a finished one a
 * live job still references (`state` is then `referenced`). Nothing was written.
 */
export class JobActionRefusedError extends WorkhorseError {
  constructor(
    message: string,
    /** The job the action was refused for. */
    readonly jobId: string,
    /** `run_now`, `reschedule` or `delete`. */
    readonly action: string,
    /**
     * The state that refused it: `active`, `canceling`, `ready`, `scheduled`, `retrying`,
     * `sleeping`, `waiting` (for a signal or decision), `blocked`, `succeeded`, `failed`,
     * `canceled` or `referenced`.
     */
    readonly state: string,
  ) {
    super(message);
  }
}
