// What a running handler sends as its job's owner (job id, worker id and fence token first):
// checkpoints, progress, durable sleeps, prerequisites, children, signal and human waits.

/**
 * Saves a checkpoint: job id, worker id, fence, name, value (JSON text or null), whether inside the
 * handler's transaction. Answers the status and the value now stored, wrapped as the claim hands
 * checkpoints over ([] for a stage that returned nothing, [value] otherwise; null when stale).
 */
export const SAVE_CHECKPOINT = 'SELECT status, stored FROM workhorse.save_checkpoint_v2($1, $2, $3, $4, $5::jsonb, $6)';


/** Reports progress: job id, worker id, fence, value (JSON text). */
export const SET_PROGRESS = 'SELECT workhorse.set_progress_v1($1, $2, $3, $4::jsonb) AS status';

/** Reaches a durable sleep: job id, worker id, fence, name, until, ms. */
export const SLEEP = 'SELECT status, wake_at FROM workhorse.sleep_v1($1, $2, $3, $4, $5, $6)';

/** The job's prerequisites with their outcomes: job id, worker id, fence. */
export const DEPENDENCIES = 'SELECT job_id, state, result, error FROM workhorse.dependencies_v2($1, $2, $3)';

/** Starts children (or finds them on a replay) and parks the job: job id, worker id, fence, key, requests (JSON text). */
export const RUN_CHILDREN = 'SELECT status, child_id, state, result, error FROM workhorse.run_children_v1($1, $2, $3, $4, $5::jsonb)';

/** Reaches a signal wait: job id, worker id, fence, name, seq, timeout ms. */
export const WAIT_SIGNAL = 'SELECT status, payload, timeout_at FROM workhorse.wait_signal_v1($1, $2, $3, $4, $5, $6)';

/** Reaches a human wait: job id, worker id, fence, name, context (JSON), choices (JSON), timeout ms. */
export const WAIT_HUMAN = 'SELECT * FROM workhorse.wait_human_v1($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7)';
