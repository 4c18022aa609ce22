// The worker capability's statements besides those it sends as a job's owner (owner-statements.ts):
// leases renewed, the registry, handlers' retry policies and the maintenance tick.

/** Renews leases: worker id, leases (JSON text of `[{"jobId", "fence"}]`), lease ms. */
export const HEARTBEAT_MANY = 'SELECT job_id, status FROM workhorse.heartbeat_many_v1($1, $2::jsonb, $3)';

/** Reports the worker to the registry: worker id, info (JSON text), active jobs, secret (null the first time). */
export const REPORT_WORKER = 'SELECT drain, secret FROM workhorse.report_worker_v2($1, $2::jsonb, $3, $4)';

/** Leaves the registry: worker id, secret. */
export const UNREGISTER_WORKER = 'SELECT workhorse.unregister_worker_v2($1, $2)';

/** Registers the retry policies of a worker's handlers: worker id, queues, handlers (JSON text). */
export const REGISTER_HANDLERS = 'SELECT workhorse.register_handlers_v1($1, $2, $3::jsonb)';

/** BEGIN and one maintenance tick in one round trip (the caller commits). */
export const BEGIN_TICK = 'BEGIN; SELECT workhorse.tick_v1() AS tick';
