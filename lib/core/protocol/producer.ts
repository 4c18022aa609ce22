// The producer capability's statements (`Queue`): enqueue, a producer's own jobs, signals and decisions.

/** Up to 1000 requests (JSON text of an array), enqueued in input order; answers the ids in that order. */
export const ENQUEUE_MANY = 'SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)';

/** As ENQUEUE_MANY, with each request's outcome: created, duplicate, throttled or debounced. */
export const ENQUEUE_MANY_OUTCOMES = 'SELECT job_id, outcome FROM workhorse.enqueue_many_v2($1::jsonb)';

/** A job the calling login role enqueued (its job row), or no row. */
export const GET_OWN_JOB = 'SELECT * FROM workhorse.get_own_job_v1($1)';

/**
 * Reads (and registers for a notification at their end) up to 1000 jobs a waiter awaits: job ids,
 * registration lifetime in seconds. A row per distinct id: state, result, error envelope.
 */
export const AWAIT_RESULTS = 'SELECT job_id, state, result, error FROM workhorse.await_results_v1($1::uuid[], $2)';

/** Sends a signal: job id, name, payload (JSON text or null), idempotency key. */
export const SEND_SIGNAL = 'SELECT workhorse.send_signal_v1($1, $2, $3::jsonb, $4) AS status';

/** Decides a human wait: job id, name, decision (JSON text), actor, reason, idempotency key. */
export const COMPLETE_HUMAN_WAIT = 'SELECT workhorse.complete_human_wait_v1($1, $2, $3::jsonb, $4, $5, $6) AS status';

/** Makes definitions (JSON text) the desired state of a namespace's schedules. */
export const SYNC_SCHEDULES = 'SELECT key, change, revision FROM workhorse.sync_schedules_v1($1, $2::jsonb)';
