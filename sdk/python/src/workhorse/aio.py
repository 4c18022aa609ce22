"""The asyncio API: ``AsyncQueue``, ``AsyncAdmin`` and ``AsyncWorker``, on Psycopg 3's async
API (``psycopg_pool.AsyncConnectionPool``) or on asyncpg (an ``asyncpg`` pool; install the
``workhorse[asyncpg]`` extra). The same calls, options and errors as the sync classes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from . import _calls as calls
from ._drivers import AsyncDriver, driver_for
from ._engine import ErrorListener
from ._worker_base import WorkerBase, engine_options
from .context import AsyncHandlerContext
from .types import CancelResult, EnqueueRequest, JobSnapshot, JobState, Page, QueueInfo, RedriveResult, RetryPolicy, TimelineEntry


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

    async def enqueue(
        self,
        type: str,
        payload: Any,
        *,
        queue: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        retry_policy: RetryPolicy | None = None,
        tags: Sequence[str] | None = None,
        deadline: datetime | None = None,
        execution_timeout_ms: int | None = None,
        idempotency_key: str | None = None,
        idempotency_scope: str | None = None,
        idempotency_ttl_ms: int | None = None,
        conn: Any = None,
    ) -> str:
        """Enqueues one job and returns its id; see ``workhorse.Queue.enqueue``."""
        options = dict(
            queue=queue, priority=priority, run_at=run_at, max_attempts=max_attempts, retry_policy=retry_policy,
            tags=tags, deadline=deadline, execution_timeout_ms=execution_timeout_ms, idempotency_key=idempotency_key,
            idempotency_scope=idempotency_scope, idempotency_ttl_ms=idempotency_ttl_ms,
        )  # fmt: skip
        return (await self.driver.run(calls.enqueue(type, payload, options), conn))[0]

    async def enqueue_many(self, requests: Sequence[EnqueueRequest], *, conn: Any = None) -> list[str]:
        """Enqueues up to 1000 jobs, all or nothing; see ``workhorse.Queue.enqueue_many``."""
        call = calls.enqueue_many(requests)
        return [] if call is None else await self.driver.run(call, conn)


class AsyncAdmin:
    """Operator reads and actions; see ``workhorse.Admin`` (the same methods, awaited)."""

    def __init__(self, pool: Any) -> None:
        self._driver = driver_for(pool)

    async def get_job(self, job_id: str, *, conn: Any = None) -> JobSnapshot | None:
        return await self._driver.run(calls.get_job(job_id), conn)

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
        limit: int = 50,
        cursor: str | None = None,
        conn: Any = None,
    ) -> Page[JobSnapshot]:
        return await self._driver.run(calls.list_jobs(queue, type, states, limit, cursor), conn)

    async def cancel(self, job_id: str, *, reason: str | None = None, conn: Any = None) -> CancelResult:
        return await self._driver.run(calls.cancel(job_id, reason), conn)

    async def list_dead_letters(
        self,
        *,
        queue: str | None = None,
        type: str | None = None,
        error_name: str | None = None,
        finished_after: datetime | None = None,
        finished_before: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
        conn: Any = None,
    ) -> Page[JobSnapshot]:
        f = calls.dead_letter_filter(queue, type, error_name, finished_after, finished_before)
        return await self._driver.run(calls.list_dead_letters(f, limit, cursor), conn)

    async def redrive(
        self, job_id: str, *, request_id: str, actor: str | None = None, reason: str | None = None, conn: Any = None
    ) -> str:
        return await self._driver.run(calls.redrive(job_id, request_id, actor, reason), conn)

    async def redrive_many(
        self,
        *,
        request_id: str,
        queue: str | None = None,
        type: str | None = None,
        error_name: str | None = None,
        finished_after: datetime | None = None,
        finished_before: datetime | None = None,
        dry_run: bool = False,
        actor: str | None = None,
        reason: str | None = None,
        limit: int = 1000,
        conn: Any = None,
    ) -> list[RedriveResult]:
        f = calls.dead_letter_filter(queue, type, error_name, finished_after, finished_before)
        return await self._driver.run(calls.redrive_many(f, request_id, dry_run, actor, reason, limit), conn)

    async def pause_queue(self, queue: str, *, actor: str | None = None, reason: str | None = None, conn: Any = None) -> None:
        await self._driver.run(calls.set_paused(True, queue, actor, reason), conn)

    async def resume_queue(self, queue: str, *, actor: str | None = None, reason: str | None = None, conn: Any = None) -> None:
        await self._driver.run(calls.set_paused(False, queue, actor, reason), conn)

    async def list_queues(self, *, conn: Any = None) -> list[QueueInfo]:
        return await self._driver.run(calls.list_queues(), conn)


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

    def __init__(
        self,
        queue: AsyncQueue,
        *,
        queues: Sequence[str] = ("default",),
        concurrency: int = 10,
        lease_ms: int = 30_000,
        heartbeat_ms: int | None = None,
        poll_ms: int = 1000,
        tick_ms: int = 1000,
        shutdown_timeout_ms: int = 25_000,
        listen: bool = True,
        worker_id: str | None = None,
        unknown_type_delay_ms: int = 5000,
        on_error: ErrorListener | None = None,
    ) -> None:
        options = engine_options(
            queues, concurrency, lease_ms, heartbeat_ms, poll_ms, tick_ms, shutdown_timeout_ms, listen, worker_id,
            unknown_type_delay_ms,
        )  # fmt: skip
        super().__init__(options, on_error)
        self._driver = queue.driver

    async def run(self, *, handle_signals: bool = False) -> None:
        """Runs until ``stop()`` (or SIGTERM/SIGINT with ``handle_signals``), then drains."""
        await self._serve(self._driver, handle_signals)

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
