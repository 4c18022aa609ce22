// The operator capability's reads and actions (`Admin`, the dashboard and the CLI through it).

/** Any job's row (see job-row.ts), or no row. */
export const GET_JOB = 'SELECT * FROM workhorse.get_job_v1($1)';

/**
 * Every paged listing answers its rows, then, when it goes on, one row whose columns are all null
 * but `next_cursor`, a cursor the database made (see paging.ts); the caller's cursor goes back as
 * it is.
 */

/** A page of job rows: queue, type, states, limit, cursor, created after, created before, scan limit. */
export const LIST_JOBS = 'SELECT * FROM workhorse.list_jobs_v3($1, $2, $3, $4, $5, $6, $7, $8)';

/** A page of a parent's children as job rows, in start order: parent, queue, type, states, created after, created before, limit, cursor. */
export const LIST_CHILDREN = 'SELECT * FROM workhorse.list_children_v2($1, $2, $3, $4, $5, $6, $7, $8)';

/** A job's prerequisites, parent and children. */
export const JOB_LINKS = 'SELECT relation, job_id, state, key FROM workhorse.job_links_v1($1)';

/** A job's checkpoints. */
export const READ_CHECKPOINTS = 'SELECT name, value, attempt, worker_id, created_at FROM workhorse.read_checkpoints_v1($1)';

/** Finished jobs per queue and time bucket: since, bucket. */
export const QUEUE_ACTIVITY = 'SELECT * FROM workhorse.queue_activity_v1($1, $2)';

/** Cancels a job: job id, actor, reason. */
export const CANCEL = 'SELECT workhorse.cancel_v1($1, $2, $3) AS status';

/** A page of dead letters (job rows), newest first: queue, type, error name, finished after, finished before, limit, cursor. */
export const LIST_DEAD_LETTERS = 'SELECT * FROM workhorse.list_dead_letters_v2($1, $2, $3, $4, $5, $6, $7)';

/** Redrives one failed or canceled job: job id, payload, actor, reason, options. */
export const REDRIVE = 'SELECT workhorse.redrive_v1($1, $2, $3, $4, $5) AS id';

/** Redrives several. */
export const REDRIVE_MANY = 'SELECT source_job_id, new_job_id FROM workhorse.redrive_many_v1($1::jsonb, $2, $3, $4, $5, $6)';

/** Makes a scheduled, retrying or sleeping job ready now: job id, actor, reason. */
export const RUN_NOW = 'SELECT workhorse.run_now_v1($1, $2, $3) AS status';

/** A new run time and/or priority for a job not started yet: job id, run at, priority, actor, reason. */
export const RESCHEDULE = 'SELECT workhorse.reschedule_v1($1, $2, $3, $4, $5) AS status';

/** Deletes a finished job: job id, actor, reason. */
export const DELETE_JOB = 'SELECT workhorse.delete_job_v1($1, $2, $3) AS status';

/** Cancels the jobs a filter matches (or counts them): filter (JSON text), dry run, actor, reason, limit. */
export const CANCEL_MATCHING = 'SELECT workhorse.cancel_matching_v1($1::jsonb, $2, $3, $4, $5) AS result';

/** Runs the jobs a filter matches now (or counts them): filter (JSON text), dry run, actor, reason, limit. */
export const RUN_NOW_MATCHING = 'SELECT workhorse.run_now_matching_v1($1::jsonb, $2, $3, $4, $5) AS result';

/** Deletes the finished jobs a filter matches (or counts them): filter (JSON text), dry run, actor, reason, limit. */
export const DELETE_MATCHING = 'SELECT workhorse.delete_matching_v1($1::jsonb, $2, $3, $4, $5) AS result';

/** Sets a queue's policy: queue, policy (JSON text), actor, reason. */
export const SET_QUEUE_POLICY = 'SELECT workhorse.set_queue_policy_v1($1, $2::jsonb, $3, $4)';

/** Every queue with jobs, a pause record or a policy. */
export const LIST_QUEUES = 'SELECT * FROM workhorse.list_queues_v3()';

/** One queue's row of LIST_QUEUES (none for an idle queue). */
export const GET_QUEUE = 'SELECT * FROM workhorse.list_queues_v3() WHERE queue = $1';

/** Pauses a queue: queue, actor, reason. */
export const PAUSE_QUEUE = 'SELECT workhorse.pause_queue_v1($1, $2, $3)';

/** Resumes a queue: queue, actor, reason. */
export const RESUME_QUEUE = 'SELECT workhorse.resume_queue_v1($1, $2, $3)';

/** The signals sent to a job: job id, limit. */
export const JOB_SIGNALS = 'SELECT * FROM workhorse.job_signals_v1($1, $2)';

/** The signal and human waits a job reached: job id, limit. */
export const JOB_WAITS = 'SELECT * FROM workhorse.job_waits_v1($1, $2)';

/** A page of open human waits: queue, type, name, job id, limit, cursor. */
export const LIST_HUMAN_WAITS = 'SELECT * FROM workhorse.list_human_waits_v2($1, $2, $3, $4, $5, $6)';

/** A page of a job's timeline with who did each step: job id, cursor, limit. */
export const TIMELINE = 'SELECT * FROM workhorse.get_timeline_v3($1, $2, $3)';

/** The schedules of a namespace (all when null). */
export const LIST_SCHEDULES = 'SELECT * FROM workhorse.list_schedules_v1($1)';

/** A schedule's history: namespace, key, limit. */
export const SCHEDULE_HISTORY = 'SELECT * FROM workhorse.get_schedule_history_v2($1, $2, $3)';

/** Pauses a schedule: namespace, key, actor, reason; answers whether it changed. */
export const PAUSE_SCHEDULE = 'SELECT workhorse.pause_schedule_v1($1, $2, $3, $4) AS changed';

/** Resumes a schedule: namespace, key, actor, reason; answers whether it changed. */
export const RESUME_SCHEDULE = 'SELECT workhorse.resume_schedule_v1($1, $2, $3, $4) AS changed';

/** Enqueues a schedule's job now: namespace, key, actor, reason. */
export const TRIGGER_SCHEDULE = 'SELECT workhorse.trigger_schedule_v1($1, $2, $3, $4) AS job_id';

/** One consistent health snapshot: thresholds (JSON text). */
export const HEALTH = 'SELECT workhorse.health_v1($1::jsonb) AS health';

/** The registered workers. */
export const LIST_WORKERS = 'SELECT * FROM workhorse.list_workers_v2()';

/** The operator changes, newest first: kind, subject (null for any), limit, before id (null for the newest). */
export const LIST_OPERATOR_CHANGES =
  'SELECT id::text, at, kind, subject, actor, reason, login_role, detail FROM workhorse.list_operator_changes_v1($1, $2, $3, $4::bigint)';

/** Whether the installed schema has `list_workers_v2` (a schema before step 13 has not). */
export const HAS_LIST_WORKERS_V2 = "SELECT to_regprocedure('workhorse.list_workers_v2()') IS NOT NULL AS present";

/** The registered workers on a schema before step 13 (no drain login roles). */
export const LIST_WORKERS_V1 = 'SELECT * FROM workhorse.list_workers_v1()';

/** Asks a worker to drain: worker id, actor, reason. */
export const DRAIN_WORKER = 'SELECT workhorse.drain_worker_v1($1, $2, $3) AS result';

/** The retention policy and its progress. */
export const RETENTION_STATUS = 'SELECT workhorse.retention_status_v2() AS value';

/** One retention run within a budget. */
export const RETENTION_RUN = 'SELECT workhorse.retention_run_v1($1, true) AS value';

/** Sets the retention policy: policy (JSON text), actor. */
export const SET_RETENTION = 'SELECT workhorse.set_retention_v1($1::jsonb, $2) AS value';

/** Live jobs by state of every queue (the depth gauge). */
export const QUEUE_DEPTHS = 'SELECT queue, ready, scheduled, active, blocked FROM workhorse.list_queues_v2()';

/** Live jobs by state of the queues in $1. */
export const QUEUE_DEPTHS_OF = 'SELECT queue, ready, scheduled, active, blocked FROM workhorse.list_queues_v2() WHERE queue = ANY ($1)';

/** Jobs found by tag, payload (`@>`) or error, newest first: tag, payload (JSON text), error, limit, cursor, scan limit. */
export const FIND_JOBS = 'SELECT * FROM workhorse.find_jobs_v1($1, $2::jsonb, $3, $4, $5, $6)';

/** When each job of a page started and how long it ran and waited: job ids. */
export const JOB_DURATIONS = 'SELECT * FROM workhorse.job_durations_v1($1::uuid[])';

/** Run and wait time percentiles per queue or type: since, group (`queue` or `type`), sample. */
export const JOB_TIMINGS = 'SELECT * FROM workhorse.job_timings_v1($1, $2, $3)';

/** Failures grouped by error name and message: since, limit. */
export const ERROR_GROUPS = 'SELECT * FROM workhorse.error_groups_v1($1, $2)';
