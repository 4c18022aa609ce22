package workhorse

import (
	"encoding/json"
	"time"
)

// Every SQL statement the Go SDK sends, in one place (TestSQLOnlyInProtocol keeps it so; the
// migrator's install SQL is migrate.go's), and the one mapping of the job row (jobRowColumns,
// scanJobRow). Grouped by capability: producer, worker (as a job's owner, and besides),
// operator, and the reads of the installed schema.

// The columns of a job row (the workhorse.job_snapshot view the read functions return), in
// scanJobRow's order.
const jobRowColumns = `id::text, queue, type, payload, priority, max_attempts, retry_policy, to_json(tags)::text, state,
  current_attempt, run_at, created_at, finished_at, result, error, worker_id, lease_expires_at, cancel_requested_at,
  progress, redriven_from::text, to_json(redriven_to)::text, seq, deadline, execution_timeout_ms`

// scanJobRow reads one job row (jobRowColumns, then extra when given) into a snapshot, and its
// seq (the listing's position) into seq: the one mapping of the job row.
func scanJobRow(r rows, seq *int64, extra *string) (JobSnapshot, error) {
	var j JobSnapshot
	var priority, maxAttempts, attempt int64
	var tags, redrivenTo, errorJSON, payload, policy, result, progress []byte
	var state string
	var worker, redrivenFrom *string
	var timeoutMs *int64
	dest := []any{&j.ID, &j.Queue, &j.Type, &payload, &priority, &maxAttempts, &policy, &tags, &state,
		&attempt, &j.RunAt, &j.CreatedAt, &j.FinishedAt, &result, &errorJSON, &worker, &j.LeaseExpiresAt, &j.CancelRequestedAt,
		&progress, &redrivenFrom, &redrivenTo, seq, &j.Deadline, &timeoutMs}
	if extra != nil {
		dest = append(dest, extra)
	}
	if err := r.Scan(dest...); err != nil {
		return j, err
	}
	j.Payload, j.RetryPolicy, j.Result, j.Progress = payload, policy, result, progress
	j.State = JobState(state)
	j.Priority, j.MaxAttempts, j.CurrentAttempt = int(priority), int(maxAttempts), int(attempt)
	j.WorkerID, j.RedrivenFrom = deref(worker), deref(redrivenFrom)
	if timeoutMs != nil {
		j.ExecutionTimeout = time.Duration(*timeoutMs) * time.Millisecond
	}
	if errorJSON != nil {
		j.Error = &ErrorEnvelope{}
		if err := json.Unmarshal(errorJSON, j.Error); err != nil {
			return j, err
		}
	}
	if err := json.Unmarshal(tags, &j.Tags); err != nil {
		return j, err
	}
	if err := json.Unmarshal(redrivenTo, &j.RedrivenTo); err != nil {
		return j, err
	}
	return j, nil
}

// Producer (Queue).
const (
	// Up to 1000 requests (JSON), enqueued in input order; answers the ids in that order.
	enqueueManySQL = "SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)"

	// As enqueueManySQL, with each request's outcome (created, duplicate, throttled, debounced).
	enqueueManyOutcomesSQL = "SELECT job_id, outcome FROM workhorse.enqueue_many_v2($1::jsonb)"

	// Sends a signal: job id, name, payload (JSON), idempotency key.
	sendSignalSQL = "SELECT workhorse.send_signal_v1($1, $2, $3::jsonb, $4)"

	// Decides a human wait: job id, name, decision (JSON), actor, reason, idempotency key.
	completeHumanWaitSQL = "SELECT workhorse.complete_human_wait_v1($1, $2, $3::jsonb, $4, $5, $6)"

	// Makes definitions (JSON) the desired state of a namespace's schedules.
	syncSchedulesSQL = "SELECT key, change, revision FROM workhorse.sync_schedules_v1($1, $2::jsonb)"

	// A job this login role enqueued (see jobRowColumns), or no row.
	getOwnJobSQL = "SELECT " + jobRowColumns + " FROM workhorse.get_own_job_v1($1)"
)

// Worker, as a job's owner (job id, worker id and fence token first).
const (
	// Saves a checkpoint: job id, worker id, fence, name, value (JSON), in a transactional handler's transaction.
	saveCheckpointSQL = "SELECT status, stored::text FROM workhorse.save_checkpoint_v2($1, $2, $3, $4, $5::jsonb, $6)"

	// Reports progress: job id, worker id, fence, value (JSON).
	setProgressSQL = "SELECT workhorse.set_progress_v1($1, $2, $3, $4::jsonb)"

	// Reaches a durable sleep: job id, worker id, fence, name, until, ms.
	sleepSQL = "SELECT status, wake_at FROM workhorse.sleep_v1($1, $2, $3, $4, $5::text::timestamptz, $6::bigint)"

	// The job's prerequisites with their outcomes: job id, worker id, fence.
	dependenciesSQL = "SELECT job_id::text, state, result, error FROM workhorse.dependencies_v2($1, $2, $3)"

	// Starts children (or finds them on a replay) and parks the job: job id, worker id, fence, key, requests (JSON).
	runChildrenSQL = "SELECT status, child_id::text, state, result, error FROM workhorse.run_children_v1($1, $2, $3, $4, $5::jsonb)"

	// Reaches a signal wait: job id, worker id, fence, name, seq, timeout ms.
	waitSignalSQL = "SELECT status, payload, timeout_at FROM workhorse.wait_signal_v1($1, $2, $3, $4, $5, $6)"

	// Reaches a human wait: job id, worker id, fence, name, context, choices, timeout ms.
	waitHumanSQL = "SELECT status, decision, actor, reason, decided_at, timeout_at FROM workhorse.wait_human_v1($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7)"

	// Confirms a stopped canceled job: job id, worker id, fence.
	acknowledgeCancelSQL = "SELECT workhorse.acknowledge_cancel_v1($1, $2, $3)"

	// Records a failed attempt: job id, worker id, fence, error envelope (JSON), options (JSON).
	failSQL = "SELECT status, run_at, delay_ms FROM workhorse.fail_v1($1, $2, $3, $4::jsonb, $5::jsonb)"

	// Hands a job back without using its attempt: job id, worker id, fence, delay ms, reason.
	releaseSQL = "SELECT workhorse.release_v1($1, $2, $3, $4, $5)"
)

// pumpSQL is the hot path's statement, with the columns the worker uses. The completions that
// succeeded (nearly all) are left out: only the others (canceled, stale) come back, each with
// its job id, followed by the claimed jobs. Absent columns are coalesced so rows scan into
// plain values. pgx prepares it once per connection.
const pumpSQL = "SELECT job_id::text, status, coalesce(queue, ''), coalesce(type, ''), payload, coalesce(attempt, 0), " +
	"coalesce(max_attempts, 0), coalesce(fence_token, 0), coalesce(execution_timeout_ms, 0), checkpoints, waits " +
	"FROM workhorse.complete_and_claim_v1($1, $2::jsonb, $3::text[], $4, $5) WHERE status <> 'succeeded'"

// pumpTracedSQL is pumpSQL with each claimed job's trace context, for a worker that traces (the
// others do not fetch it).
const pumpTracedSQL = "SELECT job_id::text, status, coalesce(queue, ''), coalesce(type, ''), payload, coalesce(attempt, 0), " +
	"coalesce(max_attempts, 0), coalesce(fence_token, 0), coalesce(execution_timeout_ms, 0), checkpoints, waits, trace_context " +
	"FROM workhorse.complete_and_claim_v1($1, $2::jsonb, $3::text[], $4, $5) WHERE status <> 'succeeded'"

// Worker, besides.
const (
	// Renews leases: worker id, leases (JSON), lease ms.
	heartbeatManySQL = "SELECT job_id::text, status FROM workhorse.heartbeat_many_v1($1, $2::jsonb, $3)"

	// Reports the worker to the registry: worker id, info (JSON), active jobs, secret.
	reportWorkerSQL = "SELECT drain, secret FROM workhorse.report_worker_v2($1, $2::jsonb, $3, $4)"

	// Leaves the registry: worker id, secret.
	unregisterWorkerSQL = "SELECT workhorse.unregister_worker_v2($1, $2)"

	// One maintenance tick.
	tickSQL = "SELECT workhorse.tick_v1()"

	// Registers the handlers' retry policies for the worker's queues: worker id, queues, handlers (JSON).
	registerHandlersSQL = "SELECT workhorse.register_handlers_v1($1, $2::text[], $3::jsonb)"

	// Records a success in a transactional handler's own transaction: job id, worker id, fence, result (JSON).
	completeSQL = "SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb)"
)

// Operator (Admin).
const (
	// Any job's row (see jobRowColumns), or no row.
	getJobSQL = "SELECT " + jobRowColumns + ", coalesce(concurrency_key, '') FROM workhorse.get_job_v1($1)"

	// A job's checkpoints, oldest first.
	readCheckpointsSQL = "SELECT name, value, attempt, worker_id, created_at FROM workhorse.read_checkpoints_v1($1)"

	// The signals sent to a job, newest first: job id, limit.
	jobSignalsSQL = "SELECT id::text, name, payload, status, wait_seq, sent_at FROM workhorse.job_signals_v1($1, $2)"

	// The signal and human waits a job reached, newest first: job id, limit.
	jobWaitsSQL = `SELECT kind, name, seq, status, timeout_at, attempt, created_at, resolved_at, signal_id::text, context,
	    choices, decision, actor, reason FROM workhorse.job_waits_v1($1, $2)`

	// Finished jobs per queue and time bucket: since, bucket seconds.
	queueActivitySQL = "SELECT queue, bucket, succeeded, failed, canceled FROM workhorse.queue_activity_v1($1::text::timestamptz, $2)"

	// The operator changes, newest first: kind, subject, limit, before id.
	listOperatorChangesSQL = "SELECT id::text, at, kind, subject, actor, reason, login_role, detail FROM workhorse.list_operator_changes_v1($1, $2, $3, $4::text::bigint)"

	// One consistent health snapshot: thresholds (JSON).
	healthSQL = "SELECT workhorse.health_v1($1::jsonb)"

	// The retention policy and how far retention got.
	retentionStatusSQL = "SELECT workhorse.retention_status_v2()"

	// One retention pass now: budget.
	retentionRunSQL = "SELECT workhorse.retention_run_v1($1, true)"

	// Sets the retention policy: settings (JSON), actor.
	setRetentionSQL = "SELECT workhorse.set_retention_v1($1::jsonb, $2)::text"

	// Sets a queue's flow-control policy: queue, policy (JSON), actor, reason; answers the
	// policy now in force (JSON).
	setQueuePolicySQL = "SELECT workhorse.set_queue_policy_v1($1, $2::jsonb, $3, $4)::text"

	// A job's prerequisites, parent and children.
	jobLinksSQL = "SELECT relation, job_id::text, state, key FROM workhorse.job_links_v1($1)"

	// Cancels a job: job id, reason.
	cancelSQL = "SELECT workhorse.cancel_v1($1, $2)"

	// Operator actions on jobs (sql/063_job_actions.sql): job id, (run at, priority,) actor, reason.
	runNowSQL     = "SELECT workhorse.run_now_v1($1, $2, $3)"
	rescheduleSQL = "SELECT workhorse.reschedule_v1($1, $2, $3, $4, $5)"
	deleteJobSQL  = "SELECT workhorse.delete_job_v1($1, $2, $3)"

	// Bulk actions over a filter: filter (JSON), dry run, actor, reason, limit; the answer as JSON text.
	cancelMatchingSQL = "SELECT workhorse.cancel_matching_v1($1::jsonb, $2, $3, $4, $5)::text"
	runNowMatchingSQL = "SELECT workhorse.run_now_matching_v1($1::jsonb, $2, $3, $4, $5)::text"
	deleteMatchingSQL = "SELECT workhorse.delete_matching_v1($1::jsonb, $2, $3, $4, $5)::text"

	// Redrives one job: job id, request id, actor, reason.
	redriveSQL = "SELECT workhorse.redrive_v1($1, $2, $3, $4)::text"

	// Redrives the dead letters of a filter: filter (JSON), request id, dry run, actor, reason, limit.
	redriveManySQL = "SELECT source_job_id::text, new_job_id::text FROM workhorse.redrive_many_v1($1::jsonb, $2, $3, $4, $5, $6)"

	// Every queue with jobs, a pause record or a policy (listQueuesWhereSQL: one of them).
	listQueuesSQL = "SELECT queue, paused, changed_at, changed_by, login_role, reason, ready, scheduled, active, blocked FROM workhorse.list_queues_v2()"

	// The registered workers.
	listWorkersSQL = `SELECT worker_id, status, host, pid, to_json(queues)::text, concurrency, in_flight, version,
		started_at, last_seen_at, drain_requested_at, drain_requested_by, drain_login_role, drain_reason FROM workhorse.list_workers_v2()`

	// Asks a worker to drain: worker id, actor, reason.
	drainWorkerSQL = "SELECT workhorse.drain_worker_v1($1, $2, $3)"

	// The schedules of a namespace (all when null).
	listSchedulesSQL = `SELECT namespace, key, definition, state, revision, created_at, updated_at, paused_at, paused_by,
	    pause_reason, next_run_at, last_run_at, last_job_id::text, last_job_state, planned_through, last_error, last_error_at
	  FROM workhorse.list_schedules_v1($1)`

	// Enqueues a schedule's job now: namespace, key, actor, reason.
	triggerScheduleSQL = "SELECT workhorse.trigger_schedule_v1($1, $2, $3, $4)::text"

	// A schedule's history: namespace, key, limit.
	scheduleHistorySQL = "SELECT revision, at, change, definition, actor, login_role, reason, job_id::text FROM workhorse.get_schedule_history_v2($1, $2, $3)"

	// One queue's row of listQueuesSQL (none for an idle queue).
	getQueueSQL = listQueuesSQL + " WHERE queue = $1"

	// Pause or resume a queue: queue, actor, reason.
	pauseQueueSQL  = "SELECT workhorse.pause_queue_v1($1, $2, $3)"
	resumeQueueSQL = "SELECT workhorse.resume_queue_v1($1, $2, $3)"

	// Pause or resume a schedule: namespace, key, actor, reason; answers whether it changed.
	pauseScheduleSQL  = "SELECT workhorse.pause_schedule_v1($1, $2, $3, $4)"
	resumeScheduleSQL = "SELECT workhorse.resume_schedule_v1($1, $2, $3, $4)"
)

// notifyChannel is where the SQL functions pg_notify a queue's name whenever it gains ready work.
const notifyChannel = "workhorse_jobs"

// listenSQL listens to notifyChannel.
const listenSQL = "LISTEN " + notifyChannel

// resultsChannel is where a job's end is notified while someone awaits it (await_results_v1);
// the payload is the ended ids, comma-separated.
const resultsChannel = "workhorse_results"

// listenResultsSQL listens to resultsChannel.
const listenResultsSQL = "LISTEN " + resultsChannel

// awaitResultSQL reads (and registers for a notification at its end) one awaited job: job id,
// registration lifetime in seconds.
const awaitResultSQL = "SELECT state, result::text, error::text FROM workhorse.await_results_v1(ARRAY[$1::uuid], $2::integer)"

// The installed schema.
const (
	// Whether the schema is installed.
	hasSchemaSQL = "SELECT to_regclass('workhorse.schema_version') IS NOT NULL"
)

// The installed version, and whether this role may call workhorse.oldest_client_v1() (schema
// version 6 on; NULL when the function is absent).
const (
	schemaRowSQL = `SELECT s.version, (SELECT pg_catalog.has_function_privilege(p.oid, 'EXECUTE') FROM pg_catalog.pg_proc p
		WHERE p.oid = pg_catalog.to_regprocedure('workhorse.oldest_client_v1()')) FROM workhorse.schema_version s`
	oldestClientSQL = "SELECT workhorse.oldest_client_v1()"
)

// The listings page with cursors their SQL functions make (see pagedSQL).
var (
	// A page of job rows: queue, type, states, limit, cursor.
	listJobsSQL = pagedSQL(jobRowColumns, "workhorse.list_jobs_v3($1, $2, $3::text[], $4, $5)")

	// A page of dead letters (job rows): queue, type, error name, finished after, finished before, limit, cursor.
	listDeadLettersSQL = pagedSQL(jobRowColumns,
		"workhorse.list_dead_letters_v2($1, $2, $3, $4::text::timestamptz, $5::text::timestamptz, $6, $7)")

	// A page of a parent's children (job rows): parent, queue, type, states, limit, cursor.
	listChildrenSQL = pagedSQL(jobRowColumns, "workhorse.list_children_v2($1, $2, $3, $4::text[], NULL, NULL, $5, $6)")

	// A page of open human waits: queue, type, name, job id, limit, cursor.
	listHumanWaitsSQL = pagedSQL("job_id::text, queue, type, name, context, choices, timeout_at, attempt, created_at",
		"workhorse.list_human_waits_v2($1, $2, $3, $4::text::uuid, $5, $6)")

	// A page of a job's timeline: job id, cursor, limit.
	timelineSQL = pagedSQL("id::text, at, source, kind, attempt, worker_id, fence_token, data, login_role",
		"workhorse.get_timeline_v3($1, $2, $3)")
)

// pagedSQL reads a listing whose SQL function makes the cursors (make_cursor): after the rows,
// when the listing goes on, the function answers one row with only next_cursor. Here every row,
// in the function's order, carries that cursor ("" for none) as its last column and the
// cursor's own row is left out (in this SDK a page that goes on is never empty: none of its
// listings bounds the rows it examines). The caller's cursor goes to the function as it is; one
// the database did not make is refused with P1001 naming cursor.
func pagedSQL(columns, call string) string {
	return "WITH p AS MATERIALIZED (SELECT * FROM " + call + " WITH ORDINALITY) SELECT " + columns +
		", coalesce((SELECT x.next_cursor FROM p x WHERE x.next_cursor IS NOT NULL), '') FROM p WHERE p.next_cursor IS NULL ORDER BY p.ordinality"
}
