"""The asyncio API: ``AsyncQueue``, ``AsyncAdmin`` and ``AsyncWorker``, on Psycopg 3's async
API (``psycopg_pool.AsyncConnectionPool``) or on asyncpg (an ``asyncpg`` pool; install the
``workhorse[asyncpg]`` extra). The same calls, options and errors as the sync classes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, Unpack, overload

from . import _calls as calls
from . import _operator_calls as ops
from . import _job_action_calls as actions
from . import _orchestration_calls as orchestration
from . import _schedule_calls as schedules
from ._drivers import AsyncDriver, driver_for
from ._job_action_calls import BulkActionResult, DeleteJobResult, JobActionFilter, RescheduleResult, RunNowResult
from ._job_tracing import start_send
from ._result_wait import wait_async
from ._worker_base import WorkerBase
from .jobs import JobDefinition, TypedJob, typed_job
from .context import AsyncHandlerContext
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
    DedupeOptions,
    DrainResult,
    EnqueueOptions,
    EnqueueRequest,
    EnqueueResult,
    HumanWait,
    JobDetails,
    JobSnapshot,
    JsonValue,
    OtherEnqueueOptions,
    SendSignalStatus,
    JobState,
    Page,
    QueueInfo,
    QueuePolicy,
    RedriveResult,
    ScheduleHistoryEntry,
    ScheduleInfo,
    SyncedSchedule,
    TimelineEntry,
    WorkerInfo,
    WorkerOptions,
)


P = TypeVar("P")
R = TypeVar("R")


class AsyncQueue:
    """Puts jobs into PostgreSQL; pass ``conn`` (a Psycopg ``AsyncConnection`` or an asyncpg
    connection inside your transaction) to make the job part of your transaction.

    Example::

        queue = AsyncQueue(pool)
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("INSERT INTO orders (id) VALUES (%s)", (order_id,))
            await queue.enqueue("order.fulfill", {"orderId": order_id}, conn=conn)
    """

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.driver: AsyncDriver = driver_for(pool)

    @overload
    async def enqueue(self, type: str, payload: Any, *, conn: Any = None, **options: Unpack[EnqueueOptions]) -> str: ...
    @overload
    async def enqueue(self, type: JobDefinition[P, Any], payload: P, *, conn: Any = None, **options: Unpack[EnqueueOptions]) -> str: ...
    async def enqueue(
        self, type: str | JobDefinition[Any, Any], payload: Any, *, conn: Any = None, **options: Unpack[EnqueueOptions]
    ) -> str:
        """Enqueues one job and returns its id; see ``workhorse.Queue.enqueue``."""
        return (await self._send(calls.defined_request(type, payload, options), conn, calls.SINGLE))[0]

    async def enqueue_deduped(
        self, type: str, payload: Any, *, dedupe: DedupeOptions, conn: Any = None, **options: Unpack[OtherEnqueueOptions]
    ) -> EnqueueResult:
        """Enqueues one job with a deduplication window; see ``workhorse.Queue.enqueue_deduped``."""
        request = calls.enqueue_request(type, payload, {**options, "dedupe": dedupe})
        with start_send(request) as send:
            results = await self.driver.run(calls.enqueue_with_outcomes(request, calls.SINGLE), conn)
            send.sent([r.job_id for r in results])
        return results[0]

    async def enqueue_many(self, requests: Sequence[EnqueueRequest], *, conn: Any = None) -> list[str]:
        """Enqueues up to 1000 jobs, all or nothing; see ``workhorse.Queue.enqueue_many``."""
        wire = calls.enqueue_batch(requests)
        return await self._send(wire, conn) if wire else []

    async def _send(self, requests: list[dict[str, Any]], conn: Any, field_prefix: str = "") -> list[str]:
        # Under an active OpenTelemetry span: a PRODUCER span, whose context the jobs store.
        with start_send(requests) as send:
            ids = await self.driver.run(calls.enqueue(requests, field_prefix), conn)
            send.sent(ids)
        return ids

    async def wait_for_result(self, job_id: str, *, timeout: float | None = None) -> Any:
        """Waits until the job ends and returns its result; see ``workhorse.Queue.wait_for_result``.
        Holds one connection for its LISTEN while it waits (cancelling the task ends the wait)."""
        return await wait_async(self.driver, job_id, timeout)

    async def send_signal(
        self, job_id: str, name: str, payload: JsonValue = None, *, idempotency_key: str | None = None, conn: Any = None
    ) -> SendSignalStatus:
        """Sends a signal to a job; see ``workhorse.Queue.send_signal``."""
        return await self.driver.run(orchestration.send_signal(job_id, name, payload, idempotency_key), conn)

    async def complete_human_wait(
        self,
        job_id: str,
        name: str,
        decision: JsonValue,
        *,
        actor: str,
        reason: str | None = None,
        idempotency_key: str | None = None,
        conn: Any = None,
    ) -> CompleteHumanWaitStatus:
        """Records a human decision; see ``workhorse.Queue.complete_human_wait``."""
        call = orchestration.complete_human_wait(job_id, name, decision, actor, reason, idempotency_key)
        return await self.driver.run(call, conn)

    async def sync_schedules(
        self, namespace: str, definitions: Sequence[Mapping[str, Any]], *, actor: str | None = None, conn: Any = None
    ) -> list[SyncedSchedule]:
        """Makes ``definitions`` the desired state of ``namespace``; see ``workhorse.Queue.sync_schedules``."""
        return await self.driver.run(schedules.sync_schedules(namespace, definitions, actor), conn)


    @overload
    async def get_job(self, job_id: str, *, conn: Any = None) -> JobSnapshot | None: ...
    @overload
    async def get_job(self, job_id: str, definition: JobDefinition[P, R], *, conn: Any = None) -> TypedJob[P, R] | None: ...
    async def get_job(
        self, job_id: str, definition: JobDefinition[Any, Any] | None = None, *, conn: Any = None
    ) -> JobSnapshot | TypedJob[Any, Any] | None:
        """The snapshot of a job this role enqueued; see ``workhorse.Queue.get_job``."""
        snapshot = await self.driver.run(ops.get_own_job(job_id), conn)
        return snapshot if definition is None else typed_job(definition, snapshot)

class AsyncAdmin:
    """Operator reads and actions; see ``workhorse.Admin`` (the same methods, awaited)."""

    def __init__(self, pool: Any) -> None:
        self._driver = driver_for(pool)

    @overload
    async def get_job(self, job_id: str, *, conn: Any = None) -> JobDetails | None: ...
    @overload
    async def get_job(self, job_id: str, definition: JobDefinition[P, R], *, conn: Any = None) -> TypedJob[P, R] | None: ...
    async def get_job(
        self, job_id: str, definition: JobDefinition[Any, Any] | None = None, *, conn: Any = None
    ) -> JobDetails | TypedJob[Any, Any] | None:
        details = await self._driver.run(orchestration.get_job_details(job_id), conn)
        return details if definition is None else typed_job(definition, details)

    async def get_job_timeline(
        self, job_id: str, *, limit: int = 100, cursor: str | None = None, conn: Any = None
    ) -> Page[TimelineEntry]:
        return await self._driver.run(calls.get_job_timeline(job_id, limit, cursor), conn)

    async def list_jobs(
        self,
        *,
        queue: str | None = None,
        type: str | None = None,
        states: Sequence[JobState] | None = None,
        parent_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        conn: Any = None,
    ) -> Page[JobSnapshot]:
        if parent_id is not None:
            return await self._driver.run(orchestration.list_children(parent_id, queue, type, states, limit, cursor), conn)
        return await self._driver.run(calls.list_jobs(queue, type, states, limit, cursor), conn)

    async def cancel(self, job_id: str, *, reason: str | None = None, conn: Any = None) -> CancelResult:
        return await self._driver.run(calls.cancel(job_id, reason), conn)

    async def list_dead_letters(
        self, *, limit: int = 50, cursor: str | None = None, conn: Any = None, **filter: Unpack[DeadLetterFilter]
    ) -> Page[JobSnapshot]:
        return await self._driver.run(calls.list_dead_letters(calls.dead_letter_filter(filter), limit, cursor), conn)

    async def redrive(
        self, job_id: str, *, request_id: str, actor: str | None = None, reason: str | None = None, conn: Any = None
    ) -> str:
        return await self._driver.run(calls.redrive(job_id, request_id, actor, reason), conn)

    async def redrive_many(
        self,
        *,
        request_id: str,
        dry_run: bool = False,
        actor: str | None = None,
        reason: str | None = None,
        limit: int = 1000,
        conn: Any = None,
        **filter: Unpack[DeadLetterFilter],
    ) -> list[RedriveResult]:
        f = calls.dead_letter_filter(filter)
        return await self._driver.run(calls.redrive_many(f, request_id, dry_run, actor, reason, limit), conn)

    async def run_now(self, job_id: str, *, actor: str | None = None, reason: str | None = None, conn: Any = None) -> RunNowResult:
        return await self._driver.run(actions.run_now(job_id, actor, reason), conn)

    async def reschedule(
        self, job_id: str, *, run_at: datetime | None = None, priority: int | None = None, actor: str | None = None,
        reason: str | None = None, conn: Any = None,
    ) -> RescheduleResult:
        return await self._driver.run(actions.reschedule(job_id, run_at, priority, actor, reason), conn)

    async def delete_job(self, job_id: str, *, actor: str | None = None, reason: str | None = None, conn: Any = None) -> DeleteJobResult:
        return await self._driver.run(actions.delete_job(job_id, actor, reason), conn)

    async def cancel_matching(
        self, *, dry_run: bool = False, actor: str | None = None, reason: str | None = None, limit: int = 1000,
        conn: Any = None, **filter: Unpack[JobActionFilter],
    ) -> BulkActionResult:
        return await self._driver.run(actions.bulk("cancel", filter, dry_run, actor, reason, limit), conn)

    async def run_now_matching(
        self, *, dry_run: bool = False, actor: str | None = None, reason: str | None = None, limit: int = 1000,
        conn: Any = None, **filter: Unpack[JobActionFilter],
    ) -> BulkActionResult:
        return await self._driver.run(actions.bulk("run_now", filter, dry_run, actor, reason, limit), conn)

    async def delete_matching(
        self, *, dry_run: bool = False, actor: str | None = None, reason: str | None = None, limit: int = 1000,
        conn: Any = None, **filter: Unpack[JobActionFilter],
    ) -> BulkActionResult:
        return await self._driver.run(actions.bulk("delete", filter, dry_run, actor, reason, limit), conn)

    async def set_queue_policy(
        self, queue: str, policy: QueuePolicy | None, *, actor: str | None = None, reason: str | None = None, conn: Any = None
    ) -> dict[str, Any]:
        """As ``workhorse.Admin.set_queue_policy``."""
        return await self._driver.run(calls.set_queue_policy(queue, policy, actor, reason), conn)

    async def pause_queue(self, queue: str, *, actor: str | None = None, reason: str | None = None, conn: Any = None) -> None:
        await self._driver.run(calls.set_paused(True, queue, actor, reason), conn)

    async def resume_queue(self, queue: str, *, actor: str | None = None, reason: str | None = None, conn: Any = None) -> None:
        await self._driver.run(calls.set_paused(False, queue, actor, reason), conn)

    async def list_queues(self, *, conn: Any = None) -> list[QueueInfo]:
        return await self._driver.run(calls.list_queues(), conn)

    async def list_schedules(self, *, namespace: str | None = None, conn: Any = None) -> list[ScheduleInfo]:
        return await self._driver.run(schedules.list_schedules(namespace), conn)

    async def pause_schedule(
        self, key: str, *, namespace: str = "default", actor: str | None = None, reason: str | None = None, conn: Any = None
    ) -> bool:
        return await self._driver.run(schedules.set_schedule_paused(True, namespace, key, actor, reason), conn)

    async def resume_schedule(
        self, key: str, *, namespace: str = "default", actor: str | None = None, reason: str | None = None, conn: Any = None
    ) -> bool:
        return await self._driver.run(schedules.set_schedule_paused(False, namespace, key, actor, reason), conn)

    async def trigger_schedule(
        self, key: str, *, namespace: str = "default", actor: str | None = None, reason: str | None = None, conn: Any = None
    ) -> str:
        return await self._driver.run(schedules.trigger_schedule(namespace, key, actor, reason), conn)

    async def get_schedule_history(
        self, key: str, *, namespace: str = "default", limit: int = 100, conn: Any = None
    ) -> list[ScheduleHistoryEntry]:
        return await self._driver.run(schedules.schedule_history(namespace, key, limit), conn)

    async def list_workers(self, *, conn: Any = None) -> list[WorkerInfo]:
        return await self._driver.run(calls.list_workers(), conn)

    async def drain_worker(
        self, worker_id: str, *, actor: str | None = None, reason: str | None = None, conn: Any = None
    ) -> DrainResult:
        return await self._driver.run(calls.drain_worker(worker_id, actor, reason), conn)

    async def list_human_waits(
        self,
        *,
        queue: str | None = None,
        type: str | None = None,
        name: str | None = None,
        job_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        conn: Any = None,
    ) -> Page[HumanWait]:
        return await self._driver.run(orchestration.list_human_waits(queue, type, name, job_id, limit, cursor), conn)

    async def complete_human_wait(
        self,
        job_id: str,
        name: str,
        decision: JsonValue,
        *,
        actor: str,
        reason: str | None = None,
        idempotency_key: str | None = None,
        conn: Any = None,
    ) -> CompleteHumanWaitStatus:
        call = orchestration.complete_human_wait(job_id, name, decision, actor, reason, idempotency_key)
        return await self._driver.run(call, conn)

    async def list_checkpoints(self, job_id: str, *, conn: Any = None) -> list[CheckpointEntry]:
        return await self._driver.run(ops.read_checkpoints(job_id), conn)

    async def list_job_signals(self, job_id: str, *, limit: int = 100, conn: Any = None) -> list[JobSignal]:
        return await self._driver.run(ops.job_signals(job_id, limit), conn)

    async def list_job_waits(self, job_id: str, *, limit: int = 100, conn: Any = None) -> list[JobWait]:
        return await self._driver.run(ops.job_waits(job_id, limit), conn)

    async def queue_activity(self, *, since: datetime, bucket_seconds: int, conn: Any = None) -> list[QueueActivity]:
        return await self._driver.run(ops.queue_activity(since, bucket_seconds), conn)

    async def list_operator_changes(
        self,
        *,
        kind: str | None = None,
        subject: str | None = None,
        limit: int = 100,
        before_id: str | None = None,
        conn: Any = None,
    ) -> list[OperatorChange]:
        return await self._driver.run(ops.operator_changes(kind, subject, limit, before_id), conn)

    async def health(self, thresholds: HealthThresholds | None = None, *, conn: Any = None) -> HealthReport:
        return await self._driver.run(ops.health({} if thresholds is None else thresholds), conn)

    async def retention_status(self, *, conn: Any = None) -> RetentionStatus:
        return await self._driver.run(ops.retention_status(), conn)

    async def set_retention(self, policy: RetentionPolicy, *, actor: str | None = None, conn: Any = None) -> None:
        await self._driver.run(ops.set_retention(policy, actor), conn)

    async def run_retention(self, *, budget: int = 10_000, conn: Any = None) -> RetentionRun:
        return await self._driver.run(ops.run_retention(budget), conn)

    async def find_jobs(
        self,
        *,
        tag: str | None = None,
        payload: Mapping[str, JsonValue] | None = None,
        error: str | None = None,
        limit: int = 50,
        scan_limit: int = 10_000,
        cursor: str | None = None,
        conn: Any = None,
    ) -> Page[JobSnapshot]:
        return await self._driver.run(ops.find_jobs(tag, payload, error, limit, cursor, scan_limit), conn)

    async def job_durations(self, job_ids: Sequence[str], *, conn: Any = None) -> dict[str, JobDuration]:
        return await self._driver.run(ops.job_durations(list(job_ids)), conn)

    async def job_timings(
        self, *, since: datetime, group: Literal["queue", "type"] = "queue", sample: int = 20_000, conn: Any = None
    ) -> list[TimingStats]:
        return await self._driver.run(ops.job_timings(since, group, sample), conn)

    async def error_groups(self, *, since: datetime, limit: int = 20, conn: Any = None) -> list[ErrorGroup]:
        return await self._driver.run(ops.error_groups(since, limit), conn)


class AsyncWorker(WorkerBase):
    """Claims jobs and runs their handlers in the running event loop: coroutine functions
    ``async (payload, ctx: AsyncHandlerContext)`` (a coroutine is cancelled when its job is
    canceled, its lease is lost or the worker gives up on it at shutdown; ``ctx.signal`` says
    why); plain functions run in a pool of ``concurrency`` threads. Everything else is as in
    ``workhorse.Worker``.

    Example::

        worker = AsyncWorker(AsyncQueue(pool), concurrency=50)

        @worker.handler("email.send")
        async def send(payload, ctx):
            await mailer.send(payload["to"])

        await worker.run()  # until worker.stop()
    """

    _async_transactions = True

    def __init__(self, queue: AsyncQueue, **options: Unpack[WorkerOptions]) -> None:
        """Options and defaults: see ``workhorse.WorkerOptions``."""
        super().__init__(queue.driver, options)
        #: The queue the worker was made with (``workhorse.testing.drain_async`` reads through it).
        self.queue = queue
        self._task: asyncio.Task[None] | None = None

    async def run(self, *, handle_signals: bool = False) -> None:
        """Runs until ``stop()`` (or SIGTERM/SIGINT with ``handle_signals``), then drains."""
        await self._serve(handle_signals)

    async def started(self) -> None:
        """Waits until a running worker claims (for code that started ``run()`` as a task)."""
        while self._engine is None:
            await asyncio.sleep(0.01)
        await self._engine.started.wait()

    async def stop(self, *, shutdown_timeout_ms: int | None = None) -> None:
        """Stops claiming, drains (see ``workhorse.Worker.stop``) and closes the worker's connections."""
        if self._engine is not None:
            await self._engine.stop(shutdown_timeout_ms)
        if self._task is not None:
            task, self._task = self._task, None
            await task

    async def __aenter__(self) -> Self:
        """Runs the worker as a task of the running loop inside the block (it claims when the
        block starts; a worker that cannot start raises here) and drains when the block ends::

            async with AsyncWorker(queue).handle("email.send", send):
                ...
        """
        self._task = asyncio.create_task(self.run())
        starting = asyncio.create_task(self.started())
        await asyncio.wait({self._task, starting}, return_when=asyncio.FIRST_COMPLETED)
        if self._task.done():
            starting.cancel()
            task, self._task = self._task, None
            await task  # raises what stopped it from starting
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()


__all__ = ["AsyncAdmin", "AsyncHandlerContext", "AsyncQueue", "AsyncWorker"]
