"""``workhorse.testing``: drain, wait for a state and list what was enqueued, sync and asyncio
(the README's test file runs the sync forms with the pytest plugin's fixtures)."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import HandlerContext, NonRetryableError, Queue, Worker
from workhorse.aio import AsyncHandlerContext, AsyncQueue, AsyncWorker
from workhorse.testing import (
    assert_enqueued,
    drain,
    drain_async,
    list_enqueued,
    list_enqueued_async,
    wait_for_state,
    wait_for_state_async,
)


def test_drain_runs_what_is_ready_and_counts_it(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    ids = [queue.enqueue("ok", {"i": i}) for i in range(3)] + [queue.enqueue("bad", {})]
    worker = Worker(queue, concurrency=2)
    worker.handle("ok", lambda payload, ctx: payload["i"])

    def bad(payload: Any, ctx: HandlerContext) -> None:
        raise NonRetryableError("no")

    worker.handle("bad", bad)
    report = drain(worker)
    assert (report.succeeded, report.failed, report.retried) == (3, 1, 0)
    assert [j.id for j in list_enqueued(pool)] == ids
    assert [j.state for j in list_enqueued(pool, type="ok")] == ["succeeded"] * 3
    assert wait_for_state(pool, ids[3], ["failed", "canceled"]).error is not None


def test_assert_enqueued_and_wait_for_state_say_what_they_found(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    job_id = queue.enqueue("mail", {"to": "a", "n": 1}, queue="m")
    queue.enqueue("mail", {"to": "b"}, queue="m")
    assert assert_enqueued(pool, type="mail", payload={"to": "a"}).id == job_id
    with pytest.raises(AssertionError, match="found 2"):
        assert_enqueued(pool, type="mail")
    with pytest.raises(TimeoutError, match="is ready, not"):
        wait_for_state(pool, job_id, "succeeded", timeout=0.1)


async def test_the_async_forms(apool: AsyncConnectionPool[Any]) -> None:
    queue = AsyncQueue(apool)
    job_id = await queue.enqueue("double", {"n": 21})
    worker = AsyncWorker(queue)

    async def double(payload: Any, ctx: AsyncHandlerContext) -> int:
        return int(payload["n"]) * 2

    worker.handle("double", double)
    assert (await drain_async(worker)).succeeded == 1
    assert (await wait_for_state_async(apool, job_id, "succeeded")).result == 42
    assert [j.id for j in await list_enqueued_async(apool, type="double")] == [job_id]
