// What a handler's call throws when its job parks: the worker has let go of the job, and the
// handler must unwind (do not catch these). The handler runs again from the top later.

/**
 * Thrown out of `ctx.runChild` / `ctx.runChildren` when the job parked until its children end:
 * the worker has let go of the job and the handler must unwind (do not catch it). The handler
 * runs again from the top once every child has ended (completed checkpoints replay, and the
 * call returns the children's outcomes). Its `signal` has aborted with this error too.
 */
export class JobBlocked extends Error {
  constructor(
    readonly jobId: string,
    readonly waitingFor: 'children',
  ) {
    super(`Job ${jobId} is blocked until its ${waitingFor} end; the handler runs again then.`);
    this.name = 'JobBlocked';
  }
}

/**
 * Thrown out of `ctx.sleep` when the job went to sleep: the worker has let go of the job and the
 * handler must unwind (do not catch it). The job runs the handler again from the top when it
 * wakes. Its `signal` has aborted with this error too.
 */
export class JobSleeping extends Error {
  constructor(
    readonly jobId: string,
    readonly wakeAt: Date,
  ) {
    super(`Job ${jobId} sleeps until ${wakeAt.toISOString()}; the handler runs again then.`);
    this.name = 'JobSleeping';
  }
}
