"""The SQL the SDK sends (calls of ``workhorse.*_v1`` functions only) and the conversion of
their rows. Shared by the sync and async clients and by both drivers (Psycopg, asyncpg), so
every statement uses ``$n`` placeholders with explicit casts, and every ``jsonb`` and ``uuid``
output is read as text and parsed here: the two drivers then return the same Python values."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from .errors import InvalidCursorError
from .types import JobSnapshot, Page, QueueInfo, ScheduleHistoryEntry, ScheduleInfo, TimelineEntry, WorkerInfo

Row = Sequence[Any]

ENQUEUE_SQL = "SELECT job_id::text FROM workhorse.enqueue_many_v1($1::jsonb)"
#: As ENQUEUE_SQL, with each request's outcome (created, duplicate, throttled, debounced).
ENQUEUE_OUTCOMES_SQL = "SELECT job_id::text, outcome FROM workhorse.enqueue_many_v2($1::jsonb)"

_SNAPSHOT_COLUMNS = (
    "id::text, queue, type, payload::text, priority, state, current_attempt, max_attempts, retry_policy::text, tags, "
    "deadline, execution_timeout_ms, run_at, created_at, finished_at, result::text, error::text, worker_id, "
    "lease_expires_at, cancel_requested_at, progress::text, redriven_from::text, redriven_to::text[], seq"
)
# Every listing's SQL makes its cursors: after the rows, when the listing goes on, one row whose
# columns are all NULL but the last, ``next_cursor`` (see page_of).
LIST_JOBS_SQL = (
    f"SELECT {_SNAPSHOT_COLUMNS}, next_cursor FROM workhorse.list_jobs_v3($1::text, $2::text, $3::text[], $4::integer, "
    "$5::text)"
)
LIST_DEAD_LETTERS_SQL = (
    f"SELECT {_SNAPSHOT_COLUMNS}, next_cursor "
    "FROM workhorse.list_dead_letters_v2($1::text, $2::text, $3::text, $4::timestamptz, $5::timestamptz, $6::integer, "
    "$7::text)"
)
TIMELINE_SQL = (
    "SELECT id, at, source, kind, attempt, worker_id, fence_token, data::text, login_role, next_cursor "
    "FROM workhorse.get_timeline_v3($1::uuid, $2::text, $3::integer)"
)
CANCEL_SQL = "SELECT workhorse.cancel_v1($1::uuid, $2::text)"
REDRIVE_SQL = "SELECT workhorse.redrive_v1($1::uuid, $2::text, $3::text, $4::text)::text"
REDRIVE_MANY_SQL = (
    "SELECT source_job_id::text, new_job_id::text "
    "FROM workhorse.redrive_many_v1($1::jsonb, $2::text, $3::boolean, $4::text, $5::text, $6::integer)"
)
PAUSE_SQL = "SELECT workhorse.pause_queue_v1($1::text, $2::text, $3::text)::text"
SET_QUEUE_POLICY_SQL = "SELECT workhorse.set_queue_policy_v1($1::text, $2::jsonb, $3::text, $4::text)::text"
RESUME_SQL = "SELECT workhorse.resume_queue_v1($1::text, $2::text, $3::text)::text"
LIST_QUEUES_SQL = (
    "SELECT queue, paused, changed_at, changed_by, login_role, reason, ready, scheduled, active, blocked"
    " FROM workhorse.list_queues_v2()"
)
SCHEMA_PRESENT_SQL = "SELECT to_regclass('workhorse.schema_version') IS NOT NULL"
#: The installed version, and whether this role may call ``workhorse.oldest_client_v1()``
#: (schema version 6 on; NULL when the function is absent).
SCHEMA_ROW_SQL = (
    "SELECT s.version, (SELECT pg_catalog.has_function_privilege(p.oid, 'EXECUTE') FROM pg_catalog.pg_proc p "
    "WHERE p.oid = pg_catalog.to_regprocedure('workhorse.oldest_client_v1()')) FROM workhorse.schema_version s"
)
OLDEST_CLIENT_SQL = "SELECT workhorse.oldest_client_v1()"

# ---- worker side ----------------------------------------------------------------------------

#: The hot path: records completions and claims in one statement and one commit. Completions that
#: succeeded (nearly all) are left out of the answer, as the TypeScript worker does.
PUMP_SQL = (
    "SELECT job_id::text, status, queue, type, payload::text, attempt, max_attempts, fence_token, execution_timeout_ms, "
    "checkpoints::text, waits::text, trace_context::text "
    "FROM workhorse.complete_and_claim_v1($1::text, $2::jsonb, $3::text[], $4::integer, $5::integer) "
    "WHERE status <> 'succeeded'"
)
HEARTBEAT_SQL = "SELECT job_id::text, status FROM workhorse.heartbeat_many_v1($1::text, $2::jsonb, $3::integer)"
FAIL_SQL = (
    "SELECT status, run_at, delay_ms "
    "FROM workhorse.fail_v1($1::uuid, $2::text, $3::bigint, $4::jsonb, $5::jsonb)"
)
#: A transactional handler's success, in its own transaction: ``succeeded``, ``canceled`` or ``stale``.
COMPLETE_SQL = "SELECT workhorse.complete_v1($1::uuid, $2::text, $3::bigint, $4::jsonb)"
RELEASE_SQL = "SELECT workhorse.release_v1($1::uuid, $2::text, $3::bigint, $4::integer, $5::text)"
ACK_CANCEL_SQL = "SELECT workhorse.acknowledge_cancel_v1($1::uuid, $2::text, $3::bigint)"
#: Answers the status and the value now stored under the name (``[]`` or ``[value]``; NULL when stale).
CHECKPOINT_SQL = (
    "SELECT status, stored::text FROM workhorse.save_checkpoint_v2($1::uuid, $2::text, $3::bigint, $4::text, $5::jsonb)"
)
PROGRESS_SQL = "SELECT workhorse.set_progress_v1($1::uuid, $2::text, $3::bigint, $4::jsonb)"
SLEEP_SQL = (
    "SELECT status, wake_at FROM workhorse.sleep_v1($1::uuid, $2::text, $3::bigint, $4::text, $5::timestamptz, $6::bigint)"
)
TICK_SQL = "SELECT workhorse.tick_v1()::text"
REGISTER_HANDLERS_SQL = "SELECT workhorse.register_handlers_v1($1::text, $2::text[], $3::jsonb)"
# The first report registers (no secret) and answers the secret every later report and the
# unregistering present (sql/095_workers.sql).
REPORT_WORKER_SQL = "SELECT drain, secret FROM workhorse.report_worker_v2($1::text, $2::jsonb, $3::integer, $4::text)"
UNREGISTER_WORKER_SQL = "SELECT workhorse.unregister_worker_v2($1::text, $2::text)"
LIST_WORKERS_SQL = (
    "SELECT worker_id, status, host, pid, queues, concurrency, in_flight, version, started_at, last_seen_at, "
    "drain_requested_at, drain_requested_by, drain_login_role, drain_reason FROM workhorse.list_workers_v2()"
)
#: ``workhorse schema status`` reads the live workers' versions on any installed schema, also one
#: older than this release (before the step that added ``list_workers_v2``).
HAS_LIST_WORKERS_V2_SQL = "SELECT to_regprocedure('workhorse.list_workers_v2()') IS NOT NULL"
WORKER_VERSIONS_V1_SQL = "SELECT status, version FROM workhorse.list_workers_v1()"
WORKER_VERSIONS_V2_SQL = "SELECT status, version FROM workhorse.list_workers_v2()"
DRAIN_WORKER_SQL = "SELECT workhorse.drain_worker_v1($1::text, $2::text, $3::text)"
RUN_CHILDREN_SQL = (
    "SELECT status, child_id::text, state, result::text, error::text "
    "FROM workhorse.run_children_v1($1::uuid, $2::text, $3::bigint, $4::text, $5::jsonb)"
)
DEPENDENCIES_SQL = (
    "SELECT job_id::text, state, result::text, error::text FROM workhorse.dependencies_v2($1::uuid, $2::text, $3::bigint)"
)
WAIT_SIGNAL_SQL = (
    "SELECT status, payload::text, timeout_at "
    "FROM workhorse.wait_signal_v1($1::uuid, $2::text, $3::bigint, $4::text, $5::integer, $6::bigint)"
)
WAIT_HUMAN_SQL = (
    "SELECT status, decision::text, actor, reason, decided_at, timeout_at "
    "FROM workhorse.wait_human_v1($1::uuid, $2::text, $3::bigint, $4::text, $5::jsonb, $6::jsonb, $7::bigint)"
)

# ---- orchestration, client side -------------------------------------------------------------

#: A job's snapshot and its lineage (``job_links_v1``: prerequisites, parent, children) as JSON text.
GET_JOB_DETAILS_SQL = (
    f"SELECT {_SNAPSHOT_COLUMNS}, (SELECT coalesce(jsonb_agg(jsonb_build_object("
    "'relation', l.relation, 'id', l.job_id, 'state', l.state, 'key', l.key) ORDER BY l.ord), '[]')::text "
    "FROM workhorse.job_links_v1($1::uuid) WITH ORDINALITY AS l (relation, job_id, state, key, ord)), "
    "concurrency_key FROM workhorse.get_job_v1($1::uuid)"
)
#: A page of a parent's children, filtered by queue, type and states, after the cursor $6.
LIST_CHILDREN_SQL = (
    f"SELECT {_SNAPSHOT_COLUMNS}, next_cursor FROM workhorse.list_children_v2($1::uuid, $2::text, $3::text, "
    "$4::text[], NULL, NULL, $5::integer, $6::text)"
)
SEND_SIGNAL_SQL = "SELECT workhorse.send_signal_v1($1::uuid, $2::text, $3::jsonb, $4::text)"
COMPLETE_HUMAN_WAIT_SQL = "SELECT workhorse.complete_human_wait_v1($1::uuid, $2::text, $3::jsonb, $4::text, $5::text, $6::text)"
LIST_HUMAN_WAITS_SQL = (
    "SELECT id, job_id::text, queue, type, name, context::text, choices::text, timeout_at, attempt, created_at, "
    "next_cursor FROM workhorse.list_human_waits_v2($1::text, $2::text, $3::text, $4::uuid, $5::integer, $6::text)"
)
NOTIFY_CHANNEL = "workhorse_jobs"
LISTEN_SQL = f"LISTEN {NOTIFY_CHANNEL}"
#: A job's end is notified here while someone awaits it (payload: ended ids, comma-separated).
RESULTS_CHANNEL = "workhorse_results"
LISTEN_RESULTS_SQL = f"LISTEN {RESULTS_CHANNEL}"
#: The LISTEN statement of each channel.
UNLISTEN_RESULTS_SQL = f"UNLISTEN {RESULTS_CHANNEL}"
LISTEN_STATEMENTS = {NOTIFY_CHANNEL: LISTEN_SQL, RESULTS_CHANNEL: LISTEN_RESULTS_SQL}
#: Reads (and registers for a notification at their end) up to 1000 awaited jobs.
AWAIT_RESULTS_SQL = (
    "SELECT job_id::text, state, result::text, error::text FROM workhorse.await_results_v1($1::uuid[], $2::integer)"
)


def parse_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def to_snapshot(row: Row) -> JobSnapshot:
    return JobSnapshot(
        id=row[0],
        queue=row[1],
        type=row[2],
        payload=parse_json(row[3]),
        priority=row[4],
        state=row[5],
        current_attempt=row[6],
        max_attempts=row[7],
        retry_policy=parse_json(row[8]),
        tags=list(row[9]),
        deadline=row[10],
        execution_timeout_ms=row[11],
        run_at=row[12],
        created_at=row[13],
        finished_at=row[14],
        result=parse_json(row[15]),
        error=parse_json(row[16]),
        worker_id=row[17],
        lease_expires_at=row[18],
        cancel_requested_at=row[19],
        progress=parse_json(row[20]),
        redriven_from=row[21],
        redriven_to=list(row[22]),
        concurrency_key=None,
    )


SNAPSHOT_SEQ = 23


def to_timeline_entry(row: Row) -> TimelineEntry:
    return TimelineEntry(
        id=row[0],
        at=row[1],
        source=row[2],
        kind=row[3],
        attempt=row[4],
        worker_id=row[5],
        fence_token=row[6],
        data=parse_json(row[7]),
        login_role=row[8],
    )


def to_queue_info(row: Row) -> QueueInfo:
    return QueueInfo(
        queue=row[0],
        paused=row[1],
        changed_at=row[2],
        changed_by=row[3],
        login_role=row[4],
        reason=row[5],
        ready=int(row[6]),
        scheduled=int(row[7]),
        active=int(row[8]),
        blocked=int(row[9]),
    )


def to_worker_info(row: Row) -> WorkerInfo:
    return WorkerInfo(
        worker_id=row[0],
        status=row[1],
        host=row[2],
        pid=row[3],
        queues=list(row[4]),
        concurrency=row[5],
        in_flight=row[6],
        version=row[7],
        started_at=row[8],
        last_seen_at=row[9],
        drain_requested_at=row[10],
        drain_requested_by=row[11],
        drain_login_role=row[12],
        drain_reason=row[13],
    )


# ---- cursors --------------------------------------------------------------------------------
# The database makes every listing's cursors and refuses one it did not make (P1001 naming
# ``cursor``, raised as InvalidCursorError); this SDK passes them through.

T = TypeVar("T")


def check_cursor(cursor: object) -> str | None:
    """A caller's cursor as it is (None for none); only what is not text is refused here."""
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidCursorError()
    return cursor


def page_of(rows: Sequence[Row], item: Callable[[Row], T]) -> Page[T]:
    """A page of a listing whose last row, when the listing goes on, only carries the next cursor."""
    nxt = rows[-1][-1] if rows else None
    return Page([item(r) for r in (rows[:-1] if nxt is not None else rows)], nxt)


def first_value(rows: Sequence[Row]) -> Any:
    return rows[0][0]


def status_of(rows: Sequence[Row]) -> str:
    return cast(str, rows[0][0])


# Schedules (sql/085_schedules.sql): the server reads cron expressions and plans every schedule.
SYNC_SCHEDULES_SQL = "SELECT key, change, revision FROM workhorse.sync_schedules_v1($1::text, $2::jsonb, $3::text)"
LIST_SCHEDULES_SQL = (
    "SELECT namespace, key, definition::text, state, revision, created_at, updated_at, paused_at, paused_by, pause_reason,"
    " next_run_at, last_run_at, last_job_id::text, last_job_state, planned_through, last_error, last_error_at"
    " FROM workhorse.list_schedules_v1($1::text)"
)
PAUSE_SCHEDULE_SQL = "SELECT workhorse.pause_schedule_v1($1::text, $2::text, $3::text, $4::text)"
RESUME_SCHEDULE_SQL = "SELECT workhorse.resume_schedule_v1($1::text, $2::text, $3::text, $4::text)"
TRIGGER_SCHEDULE_SQL = "SELECT workhorse.trigger_schedule_v1($1::text, $2::text, $3::text, $4::text)::text"
SCHEDULE_HISTORY_SQL = (
    "SELECT revision, at, change, definition::text, actor, login_role, reason, job_id::text"
    " FROM workhorse.get_schedule_history_v2($1::text, $2::text, $3::integer)"
)


def to_schedule_info(row: Row) -> ScheduleInfo:
    return ScheduleInfo(
        namespace=row[0],
        key=row[1],
        definition=parse_json(row[2]),
        state=row[3],
        revision=int(row[4]),
        created_at=row[5],
        updated_at=row[6],
        paused_at=row[7],
        paused_by=row[8],
        pause_reason=row[9],
        next_run_at=row[10],
        last_run_at=row[11],
        last_job_id=row[12],
        last_job_state=row[13],
        planned_through=row[14],
        last_error=row[15],
        last_error_at=row[16],
    )


def to_schedule_history_entry(row: Row) -> ScheduleHistoryEntry:
    return ScheduleHistoryEntry(
        revision=int(row[0]),
        at=row[1],
        change=row[2],
        definition=parse_json(row[3]),
        actor=row[4],
        login_role=row[5],
        reason=row[6],
        job_id=row[7],
    )


# Operator reads and settings beyond single jobs (sql/040, 062, 064, 066, 096, 097), and the
# producer's read of its own job (060_admin.sql).
GET_OWN_JOB_SQL = f"SELECT {_SNAPSHOT_COLUMNS} FROM workhorse.get_own_job_v1($1::uuid)"
READ_CHECKPOINTS_SQL = "SELECT name, value::text, attempt, worker_id, created_at FROM workhorse.read_checkpoints_v1($1::uuid)"
QUEUE_ACTIVITY_SQL = (
    "SELECT queue, bucket, succeeded, failed, canceled FROM workhorse.queue_activity_v1($1::timestamptz, $2::integer)"
)
JOB_SIGNALS_SQL = (
    "SELECT id::text, name, payload::text, status, wait_seq, sent_at FROM workhorse.job_signals_v1($1::uuid, $2::integer)"
)
JOB_WAITS_SQL = (
    "SELECT kind, name, seq, status, timeout_at, attempt, created_at, resolved_at, signal_id::text, context::text,"
    " choices::text, decision::text, actor, reason FROM workhorse.job_waits_v1($1::uuid, $2::integer)"
)
OPERATOR_CHANGES_SQL = (
    "SELECT id::text, at, kind, subject, actor, reason, login_role, detail::text"
    " FROM workhorse.list_operator_changes_v1($1::text, $2::text, $3::integer, $4::bigint)"
)
HEALTH_SQL = "SELECT workhorse.health_v1($1::jsonb)::text"
RETENTION_STATUS_SQL = "SELECT workhorse.retention_status_v2()::text"
RETENTION_RUN_SQL = "SELECT workhorse.retention_run_v1($1::integer, true)::text"
SET_RETENTION_SQL = "SELECT workhorse.set_retention_v1($1::jsonb, $2::text)"
# The dashboard's incident reads (sql/068_dashboard_insights.sql).
FIND_JOBS_SQL = (
    f"SELECT {_SNAPSHOT_COLUMNS}, next_cursor FROM workhorse.find_jobs_v1($1::text, $2::jsonb, $3::text, $4::integer, "
    "$5::text, $6::integer)"
)
JOB_DURATIONS_SQL = "SELECT job_id::text, started_at, run_ms, wait_ms FROM workhorse.job_durations_v1($1::uuid[])"
JOB_TIMINGS_SQL = (
    "SELECT name, attempts, run_p50_ms, run_p90_ms, run_p99_ms, wait_p50_ms, wait_p90_ms, wait_p99_ms, sampled"
    " FROM workhorse.job_timings_v1($1::timestamptz, $2::text, $3::integer)"
)
ERROR_GROUPS_SQL = (
    "SELECT error_name, message, failures, queues, first_seen, last_seen FROM workhorse.error_groups_v1($1::timestamptz, $2::integer)"
)
# Operator actions on jobs (sql/063_job_actions.sql): one job, or every job a filter matches.
RUN_NOW_SQL = "SELECT workhorse.run_now_v1($1::uuid, $2::text, $3::text)"
RESCHEDULE_SQL = "SELECT workhorse.reschedule_v1($1::uuid, $2::timestamptz, $3::integer, $4::text, $5::text)"
DELETE_JOB_SQL = "SELECT workhorse.delete_job_v1($1::uuid, $2::text, $3::text)"
CANCEL_MATCHING_SQL = "SELECT workhorse.cancel_matching_v1($1::jsonb, $2::boolean, $3::text, $4::text, $5::integer)::text"
RUN_NOW_MATCHING_SQL = "SELECT workhorse.run_now_matching_v1($1::jsonb, $2::boolean, $3::text, $4::text, $5::integer)::text"
DELETE_MATCHING_SQL = "SELECT workhorse.delete_matching_v1($1::jsonb, $2::boolean, $3::text, $4::text, $5::integer)::text"
