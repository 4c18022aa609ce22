"""``Admin``: operator reads and actions (sync)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar, Unpack, overload

from psycopg_pool import ConnectionPool

from . import _calls as calls
from . import _operator_calls as ops
from . import _job_action_calls as actions
from . import _orchestration_calls as orchestration
from . import _schedule_calls as schedules
from ._job_action_calls import BulkActionResult, DeleteJobResult, JobActionFilter, RescheduleResult, RunNowResult
from ._sync import Connection, SyncExecutor
from .jobs import JobDefinition, TypedJob, typed_job
from .operator_types import (
    CheckpointEntry,
    ErrorGroup,
    JobDuration,
    TimingStats,
    HealthReport,
    HealthThresholds,
    JobSignal,
    JobWait,
    OperatorChange,
    QueueActivity,
    RetentionPolicy,
    RetentionRun,
    RetentionStatus,
)
from .types import (
    CancelResult,
    CompleteHumanWaitStatus,
    DeadLetterFilter,
    DrainResult,
    HumanWait,
    JobDetails,
    JobSnapshot,
    JobState,
    JsonValue,
    Page,
    QueueInfo,
    QueuePolicy,
    RedriveResult,
    ScheduleHistoryEntry,
    ScheduleInfo,
    TimelineEntry,
    WorkerInfo,
)

P = TypeVar("P")
R = TypeVar("R")


class Admin:
    """Operator reads and actions. Every method takes an optional ``conn`` to join the caller's
    transaction; by default a pooled connection runs it.

    Example::

        admin = Admin(pool)
        job = admin.get_job(job_id)
        print(job.state, job.current_attempt, job.result)
    """

    def __init__(self, pool: ConnectionPool[Any]) -> None:
        self._executor = SyncExecutor(pool)

    @overload
    def get_job(self, job_id: str, *, conn: Connection | None = None) -> JobDetails | None: ...
    @overload
    def get_job(self, job_id: str, definition: JobDefinition[P, R], *, conn: Connection | None = None) -> TypedJob[P, R] | None: ...
    def get_job(
        self, job_id: str, definition: JobDefinition[Any, Any] | None = None, *, conn: Connection | None = None
    ) -> JobDetails | TypedJob[Any, Any] | None:
        """The job's snapshot, whichever state it is in, with its lineage (``dependencies``,
        ``waiting_on``, ``parent_id``, ``children``), or None when no such job exists. With
        ``definition``: a ``TypedJob`` (its payload decoded by the definition's validator)."""
        details = self._executor.run(orchestration.get_job_details(job_id), conn)
        return details if definition is None else typed_job(definition, details)

    def get_job_timeline(
        self, job_id: str, *, limit: int = 100, cursor: str | None = None, conn: Connection | None = None
    ) -> Page[TimelineEntry]:
        """The job's history (lifecycle events and closed attempts) in the order it was
        written, a page at a time; pass ``next_cursor`` back as ``cursor`` to read on."""
        return self._executor.run(calls.get_job_timeline(job_id, limit, cursor), conn)

    def list_jobs(
        self,
        *,
        queue: str | None = None,
        type: str | None = None,
        states: Sequence[JobState] | None = None,
        parent_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        conn: Connection | None = None,
    ) -> Page[JobSnapshot]:
        """Jobs newest first, filtered by queue, type and current states, a page at a time. With
        ``parent_id``: that job's children (``ctx.run_child(ren)``) in the order they were started."""
        if parent_id is not None:
            return self._executor.run(orchestration.list_children(parent_id, queue, type, states, limit, cursor), conn)
        return self._executor.run(calls.list_jobs(queue, type, states, limit, cursor), conn)

    def cancel(self, job_id: str, *, reason: str | None = None, conn: Connection | None = None) -> CancelResult:
        """Cancels a job: at once if it is not running; otherwise its worker is told to stop and
        the job ends ``canceled`` when the worker acknowledges."""
        return self._executor.run(calls.cancel(job_id, reason), conn)

    def run_now(
        self, job_id: str, *, actor: str | None = None, reason: str | None = None, conn: Connection | None = None
    ) -> RunNowResult:
        """Makes a scheduled, retrying or sleeping job ready now; any other state is refused
        (``JobActionRefusedError`` naming it). ``ready``, ``already_ready`` or ``not_found``."""
        return self._executor.run(actions.run_now(job_id, actor, reason), conn)

    def reschedule(
        self, job_id: str, *, run_at: datetime | None = None, priority: int | None = None, actor: str | None = None,
        reason: str | None = None, conn: Connection | None = None,
    ) -> RescheduleResult:
        """A new ``run_at`` and/or ``priority`` for a job that has not started (scheduled, ready,
        retrying); any other state is refused (``JobActionRefusedError``)."""
        return self._executor.run(actions.reschedule(job_id, run_at, priority, actor, reason), conn)

    def delete_job(
        self, job_id: str, *, actor: str | None = None, reason: str | None = None, conn: Connection | None = None
    ) -> DeleteJobResult:
        """Deletes a finished job and what references it, as retention would; a live job, or one
        a live job still references, is refused (``JobActionRefusedError``)."""
        return self._executor.run(actions.delete_job(job_id, actor, reason), conn)

    def cancel_matching(
        self, *, dry_run: bool = False, actor: str | None = None, reason: str | None = None, limit: int = 1000,
        conn: Connection | None = None, **filter: Unpack[JobActionFilter],
    ) -> BulkActionResult:
        """Cancels up to ``limit`` jobs the filter matches, oldest first, each as ``cancel`` does
        (a running job's worker is told); with ``dry_run`` counts them and shows a sample instead.
        Call again while ``more``."""
        return self._executor.run(actions.bulk("cancel", filter, dry_run, actor, reason, limit), conn)

    def run_now_matching(
        self, *, dry_run: bool = False, actor: str | None = None, reason: str | None = None, limit: int = 1000,
        conn: Connection | None = None, **filter: Unpack[JobActionFilter],
    ) -> BulkActionResult:
        """Runs up to ``limit`` scheduled, retrying or sleeping jobs the filter matches now."""
        return self._executor.run(actions.bulk("run_now", filter, dry_run, actor, reason, limit), conn)

    def delete_matching(
        self, *, dry_run: bool = False, actor: str | None = None, reason: str | None = None, limit: int = 1000,
        conn: Connection | None = None, **filter: Unpack[JobActionFilter],
    ) -> BulkActionResult:
        """Deletes up to ``limit`` finished jobs the filter matches; live and referenced ones are counted."""
        return self._executor.run(actions.bulk("delete", filter, dry_run, actor, reason, limit), conn)

    def list_dead_letters(
        self, *, limit: int = 50, cursor: str | None = None, conn: Connection | None = None, **filter: Unpack[DeadLetterFilter]
    ) -> Page[JobSnapshot]:
        """Dead letters (failed jobs), newest first, filtered by queue, type, final error name and
        finish time (``queue``, ``type``, ``error_name``, ``finished_after``, ``finished_before``),
        a page at a time."""
        return self._executor.run(calls.list_dead_letters(calls.dead_letter_filter(filter), limit, cursor), conn)

    def redrive(
        self,
        job_id: str,
        *,
        request_id: str,
        actor: str | None = None,
        reason: str | None = None,
        conn: Connection | None = None,
    ) -> str:
        """Redrives a dead letter into a new job (attempt 1, no checkpoints) and returns its id.
        Idempotent per ``request_id``."""
        return self._executor.run(calls.redrive(job_id, request_id, actor, reason), conn)

    def redrive_many(
        self,
        *,
        request_id: str,
        dry_run: bool = False,
        actor: str | None = None,
        reason: str | None = None,
        limit: int = 1000,
        conn: Connection | None = None,
        **filter: Unpack[DeadLetterFilter],
    ) -> list[RedriveResult]:
        """Redrives up to ``limit`` dead letters matching the filter (as ``list_dead_letters``),
        each idempotent under ``<request_id>:<job id>``; with ``dry_run`` nothing is written."""
        f = calls.dead_letter_filter(filter)
        return self._executor.run(calls.redrive_many(f, request_id, dry_run, actor, reason, limit), conn)

    def set_queue_policy(
        self,
        queue: str,
        policy: QueuePolicy | None,
        *,
        actor: str | None = None,
        reason: str | None = None,
        conn: Connection | None = None,
    ) -> dict[str, Any]:
        """Sets a queue's flow control, replacing its previous policy (``None`` or ``{}`` removes
        it): ``{"concurrency": n}`` active jobs of the queue, ``{"rateLimit": {"limit", "intervalMs"}}``
        claims per window, ``{"perKey": {"concurrency": n}}`` active jobs per ``concurrency_key``,
        across all workers. Checked by the SQL function; returns the policy now in force."""
        return self._executor.run(calls.set_queue_policy(queue, policy, actor, reason), conn)

    def pause_queue(
        self, queue: str, *, actor: str | None = None, reason: str | None = None, conn: Connection | None = None
    ) -> None:
        """Pauses a queue: workers stop claiming from it; running jobs finish, enqueue goes on."""
        self._executor.run(calls.set_paused(True, queue, actor, reason), conn)

    def resume_queue(
        self, queue: str, *, actor: str | None = None, reason: str | None = None, conn: Connection | None = None
    ) -> None:
        """Resumes a paused queue and wakes its workers."""
        self._executor.run(calls.set_paused(False, queue, actor, reason), conn)

    def list_queues(self, *, conn: Connection | None = None) -> list[QueueInfo]:
        """Every queue with live jobs or a pause record, with its live counts."""
        return self._executor.run(calls.list_queues(), conn)

    def list_schedules(self, *, namespace: str | None = None, conn: Connection | None = None) -> list[ScheduleInfo]:
        """Schedules (of one namespace, or all) by namespace and key, with their state, next
        planned occurrence (``None`` unless active) and last run."""
        return self._executor.run(schedules.list_schedules(namespace), conn)

    def pause_schedule(
        self, key: str, *, namespace: str = "default", actor: str | None = None, reason: str | None = None,
        conn: Connection | None = None,
    ) -> bool:
        """Pauses a schedule (its occurrences are skipped until it is resumed); whether it changed."""
        return self._executor.run(schedules.set_schedule_paused(True, namespace, key, actor, reason), conn)

    def resume_schedule(
        self, key: str, *, namespace: str = "default", actor: str | None = None, reason: str | None = None,
        conn: Connection | None = None,
    ) -> bool:
        """Resumes a paused schedule from its next occurrence (nothing is caught up); whether it changed."""
        return self._executor.run(schedules.set_schedule_paused(False, namespace, key, actor, reason), conn)

    def trigger_schedule(
        self, key: str, *, namespace: str = "default", actor: str | None = None, reason: str | None = None,
        conn: Connection | None = None,
    ) -> str:
        """Enqueues the schedule's job now (also while paused, whatever its overlap rule); the job's id."""
        return self._executor.run(schedules.trigger_schedule(namespace, key, actor, reason), conn)

    def get_schedule_history(
        self, key: str, *, namespace: str = "default", limit: int = 100, conn: Connection | None = None
    ) -> list[ScheduleHistoryEntry]:
        """A schedule's history, newest first: each revision's change and each trigger."""
        return self._executor.run(schedules.schedule_history(namespace, key, limit), conn)

    def list_workers(self, *, conn: Connection | None = None) -> list[WorkerInfo]:
        """The registered workers of every language, newest first, with their status
        (``running``, ``draining``, ``drained`` or ``gone``)."""
        return self._executor.run(calls.list_workers(), conn)

    def drain_worker(
        self, worker_id: str, *, actor: str | None = None, reason: str | None = None, conn: Connection | None = None
    ) -> DrainResult:
        """Asks a worker (of any language) to drain: within its heartbeat interval it claims no
        more jobs and finishes those it holds; ``list_workers`` then shows it ``drained``.
        Answers ``requested``, ``already_requested`` (the first request stands) or ``not_found``."""
        return self._executor.run(calls.drain_worker(worker_id, actor, reason), conn)

    def list_human_waits(
        self,
        *,
        queue: str | None = None,
        type: str | None = None,
        name: str | None = None,
        job_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        conn: Connection | None = None,
    ) -> Page[HumanWait]:
        """The open human waits of live jobs (see ``ctx.wait_for_human``), oldest first, with
        their context and choices, filtered by queue, job type, wait name and job id, a page at
        a time."""
        return self._executor.run(orchestration.list_human_waits(queue, type, name, job_id, limit, cursor), conn)

    def list_checkpoints(self, job_id: str, *, conn: Connection | None = None) -> list[CheckpointEntry]:
        """The checkpoints a job saved (``ctx.checkpoint``), oldest first, with their stored values."""
        return self._executor.run(ops.read_checkpoints(job_id), conn)

    def list_job_signals(self, job_id: str, *, limit: int = 100, conn: Connection | None = None) -> list[JobSignal]:
        """The signals sent to a job, newest first (at most ``limit``): each ``buffered`` until a
        wait for its name consumes it, then ``consumed``."""
        return self._executor.run(ops.job_signals(job_id, limit), conn)

    def list_job_waits(self, job_id: str, *, limit: int = 100, conn: Connection | None = None) -> list[JobWait]:
        """The waits a job's handler reached, newest first (at most ``limit``): signal and human
        waits, open or answered, with their deadlines and a human wait's decision."""
        return self._executor.run(ops.job_waits(job_id, limit), conn)

    def queue_activity(self, *, since: datetime, bucket_seconds: int, conn: Connection | None = None) -> list[QueueActivity]:
        """Finished jobs per queue and time bucket since ``since``, by terminal state (buckets
        without any are left out)."""
        return self._executor.run(ops.queue_activity(since, bucket_seconds), conn)

    def list_operator_changes(
        self,
        *,
        kind: str | None = None,
        subject: str | None = None,
        limit: int = 100,
        before_id: str | None = None,
        conn: Connection | None = None,
    ) -> list[OperatorChange]:
        """Operator changes of the settings kept in place (queue pause and resume, queue policies,
        drain requests, the retention policy), newest first, with actor, reason and login role.
        Page with ``before_id`` (the last row's id)."""
        return self._executor.run(ops.operator_changes(kind, subject, limit, before_id), conn)

    def health(self, thresholds: HealthThresholds | None = None, *, conn: Connection | None = None) -> HealthReport:
        """One consistent snapshot of the queue's health (``status``: ``ok``, ``warn`` or
        ``critical``, with its ``reasons``); thresholds left out keep their defaults
        (docs/operations.md). A bad threshold raises ``WorkhorseValidationError`` naming it."""
        return self._executor.run(ops.health({} if thresholds is None else thresholds), conn)

    def retention_status(self, *, conn: Connection | None = None) -> RetentionStatus:
        """The retention policy and how far retention got (docs/operations.md#retention)."""
        return self._executor.run(ops.retention_status(), conn)

    def set_retention(
        self, policy: RetentionPolicy, *, actor: str | None = None, conn: Connection | None = None
    ) -> None:
        """Sets the retention policy; settings left out keep their values."""
        self._executor.run(ops.set_retention(policy, actor), conn)

    def run_retention(self, *, budget: int = 10_000, conn: Connection | None = None) -> RetentionRun:
        """One retention pass now: drops expired history partitions and looks at up to ``budget``
        jobs, removing those whose window has passed (``skipped`` when another pass runs)."""
        return self._executor.run(ops.run_retention(budget), conn)

    def complete_human_wait(
        self,
        job_id: str,
        name: str,
        decision: JsonValue,
        *,
        actor: str,
        reason: str | None = None,
        idempotency_key: str | None = None,
        conn: Connection | None = None,
    ) -> CompleteHumanWaitStatus:
        """Records an operator's decision for a job's open human wait, as
        ``Queue.complete_human_wait`` does (same checks and answers), with the operator's rights."""
        call = orchestration.complete_human_wait(job_id, name, decision, actor, reason, idempotency_key)
        return self._executor.run(call, conn)

    def find_jobs(
        self,
        *,
        tag: str | None = None,
        payload: Mapping[str, JsonValue] | None = None,
        error: str | None = None,
        limit: int = 50,
        scan_limit: int = 10_000,
        cursor: str | None = None,
        conn: Connection | None = None,
    ) -> Page[JobSnapshot]:
        """Jobs newest first whose tags include ``tag``, whose payload contains ``payload``
        (``payload @> ...``) and whose error has the name ``error`` or a message containing it.
        Without an index that serves the search, a call examines at most ``scan_limit`` jobs and
        a partial page comes with a cursor (docs/dashboard.md)."""
        return self._executor.run(ops.find_jobs(tag, payload, error, limit, cursor, scan_limit), conn)

    def job_durations(self, job_ids: Sequence[str], *, conn: Connection | None = None) -> dict[str, JobDuration]:
        """The latest attempt's start and run time and the wait before the first start, of up to 1000 jobs."""
        return self._executor.run(ops.job_durations(list(job_ids)), conn)

    def job_timings(
        self, *, since: datetime, group: Literal["queue", "type"] = "queue", sample: int = 20_000, conn: Connection | None = None
    ) -> list[TimingStats]:
        """Run and wait time percentiles per queue or job type of the attempts closed since
        ``since`` (within the last 7 days), from a sample of at most ``sample`` attempts."""
        return self._executor.run(ops.job_timings(since, group, sample), conn)

    def error_groups(self, *, since: datetime, limit: int = 20, conn: Connection | None = None) -> list[ErrorGroup]:
        """Failures since ``since`` (within the last 7 days) by error name and message, most frequent first."""
        return self._executor.run(ops.error_groups(since, limit), conn)
