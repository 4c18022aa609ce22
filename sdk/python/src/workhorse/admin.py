"""``Admin``: operator reads and actions (sync)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from psycopg_pool import ConnectionPool

from . import _calls as calls
from . import _orchestration_calls as orchestration
from . import _schedule_calls as schedules
from ._sync import Connection, SyncExecutor
from .types import (
    CancelResult,
    DeadLetterFilter,
    DrainResult,
    HumanWait,
    JobDetails,
    JobSnapshot,
    JobState,
    Page,
    QueueInfo,
    QueuePolicy,
    RedriveResult,
    ScheduleHistoryEntry,
    ScheduleInfo,
    TimelineEntry,
    WorkerInfo,
)


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

    def get_job(self, job_id: str, *, conn: Connection | None = None) -> JobDetails | None:
        """The job's snapshot, whichever state it is in, with its lineage (``dependencies``,
        ``waiting_on``, ``parent_id``, ``children``), or None when no such job exists."""
        return self._executor.run(orchestration.get_job_details(job_id), conn)

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
