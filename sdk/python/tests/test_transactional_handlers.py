"""Transactional handlers: the handler's writes (through ``ctx.conn``) and the job's completion
(``complete_v1``) commit in one transaction, or neither does: a raise, a cancellation or a lost
lease rolls the writes back."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import Admin, HandlerContext, NonRetryableError, Queue, Worker, WorkhorseValidationError
from workhorse.aio import AsyncHandlerContext, AsyncQueue, AsyncWorker
from workhorse.testing import drain, drain_async, wait_for_state


def _table(pool: ConnectionPool[Any]) -> None:
    with pool.connection() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS shipments (order_id text PRIMARY KEY)")


def _shipped(pool: ConnectionPool[Any]) -> list[str]:
    with pool.connection() as conn:
        return [r[0] for r in conn.execute("SELECT order_id FROM shipments ORDER BY order_id").fetchall()]


def test_the_writes_commit_with_the_success_and_roll_back_with_a_failure(pool: ConnectionPool[Any]) -> None:
    _table(pool)
    queue = Queue(pool)
    ok = queue.enqueue("ship", {"orderId": "o-1"})
    bad = queue.enqueue("ship", {"orderId": "o-2", "fail": True})
    worker = Worker(queue)

    def ship(payload: Any, ctx: HandlerContext) -> str:
        assert ctx.conn is not None
        ctx.conn.execute("INSERT INTO shipments (order_id) VALUES (%s)", (payload["orderId"],))
        stored = ctx.checkpoint("label", lambda: {"label": payload["orderId"]})
        if payload.get("fail"):
            raise NonRetryableError("the carrier refused it")
        return str(stored["label"])

    worker.handle("ship", ship, transactional=True)
    report = drain(worker)
    assert (report.succeeded, report.failed) == (1, 1)
    assert _shipped(pool) == ["o-1"]
    admin = Admin(pool)
    job = admin.get_job(ok)
    assert job is not None and (job.state, job.result) == ("succeeded", "o-1")
    failed = admin.get_job(bad)
    assert failed is not None and failed.state == "failed"
    # The checkpoint was part of the rolled-back transaction too.
    assert admin.list_checkpoints(bad) == [] and [c.name for c in admin.list_checkpoints(ok)] == ["label"]


def test_a_job_canceled_while_its_handler_ran_rolls_the_writes_back(pool: ConnectionPool[Any]) -> None:
    _table(pool)
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("ship", {"orderId": "o-3"})
    running, go_on = threading.Event(), threading.Event()
    worker = Worker(queue, poll_ms=50)

    def ship(payload: Any, ctx: HandlerContext) -> None:
        assert ctx.conn is not None
        ctx.conn.execute("INSERT INTO shipments (order_id) VALUES (%s)", (payload["orderId"],))
        running.set()
        go_on.wait(20)  # ignores ctx.signal: returns as if it had not seen the cancellation

    worker.handle("ship", ship, transactional=True)
    with worker:
        assert running.wait(20)
        assert admin.cancel(job_id) == "cancel_requested"
        go_on.set()
        wait_for_state(pool, job_id, "canceled")
    assert _shipped(pool) == []


async def test_an_async_transactional_handler_on_psycopg_and_asyncpg(apool: AsyncConnectionPool[Any], asyncpg_pool: Any, pool: ConnectionPool[Any]) -> None:
    _table(pool)
    for p, order in ((apool, "a-1"), (asyncpg_pool, "a-2")):
        queue = AsyncQueue(p)
        job_id = await queue.enqueue("ship", {"orderId": order})
        worker = AsyncWorker(queue)

        async def ship(payload: Any, ctx: AsyncHandlerContext) -> int:
            sql = "INSERT INTO shipments (order_id) VALUES ($1)" if p is asyncpg_pool else "INSERT INTO shipments (order_id) VALUES (%s)"
            if p is asyncpg_pool:
                await ctx.conn.execute(sql, payload["orderId"])
            else:
                await ctx.conn.execute(sql, (payload["orderId"],))
            return 1

        worker.handle("ship", ship, transactional=True)
        assert (await drain_async(worker)).succeeded == 1
        assert wait_for_state(pool, job_id, "succeeded").result == 1
    assert _shipped(pool) == ["a-1", "a-2"]


def test_transactional_applies_to_the_handlers_the_worker_runs_on_its_pool(pool: ConnectionPool[Any]) -> None:
    worker = Worker(Queue(pool))

    async def coroutine(payload: Any, ctx: AsyncHandlerContext) -> None:
        pass

    with pytest.raises(WorkhorseValidationError) as raised:
        worker.handle("t", coroutine, transactional=True)
    assert raised.value.field == "transactional"
