"""The asyncio API: ``AsyncQueue``, ``AsyncAdmin`` and ``AsyncWorker``, on Psycopg 3's async
API (``psycopg_pool.AsyncConnectionPool``) or on asyncpg (an ``asyncpg`` pool; install the
``workhorse[asyncpg]`` extra). The same calls, options and errors as the sync classes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from . import _calls as calls
from . import _orchestration_calls as orchestration
from . import _schedule_calls as schedules
from ._drivers import AsyncDriver, driver_for
from ._job_tracing import start_send
from ._worker_base import WorkerBase
from .context import AsyncHandlerContext
from .types import (
    CancelResult,
    CompleteHumanWaitStatus,
    DeadLetterFilter,
    DrainResult,
    EnqueueOptions,
    EnqueueRequest,
    HumanWait,
    JobDetails,
    JobSnapshot,
    JsonValue,
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

    async def enqueue(self, type: str, payload: Any, *, conn: Any = None, **options: Unpack[EnqueueOptions]) -> str:
        """Enqueues one job and returns its id; see ``workhorse.Queue.enqueue``."""
        return (await self._send(calls.enqueue_request(type, payload, options), conn, calls.SINGLE))[0]

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


class AsyncAdmin:
    """Operator reads and actions; see ``workhorse.Admin`` (the same methods, awaited)."""

    def __init__(self, pool: Any) -> None:
        self._driver = driver_for(pool)

    async def get_job(self, job_id: str, *, conn: Any = None) -> JobDetails | None:
        return await self._driver.run(orchestration.get_job_details(job_id), conn)

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

    def __init__(self, queue: AsyncQueue, **options: Unpack[WorkerOptions]) -> None:
        """Options and defaults: see ``workhorse.WorkerOptions``."""
        super().__init__(queue.driver, options)

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


__all__ = ["AsyncAdmin", "AsyncHandlerContext", "AsyncQueue", "AsyncWorker"]
