"""Deduplication windows (``Queue.enqueue_deduped``): throttle, debounce, the caller's
transaction, bad options, in the sync and async clients and both async drivers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import DedupeOptions, EnqueueResult, Queue, WorkhorseValidationError
from workhorse.aio import AsyncQueue


def jobs_of(pool: ConnectionPool[Any], queue: str) -> list[tuple[str, Any, str]]:
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT j.id::text, j.payload, r.state FROM workhorse.job j JOIN workhorse.job_runtime r ON r.job_id = j.id"
            " WHERE j.queue = %s ORDER BY j.seq",
            (queue,),
        ).fetchall()
    return [(row[0], row[1], row[2]) for row in rows]


def test_throttle_keeps_the_first_job_of_the_window(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    dedupe: DedupeOptions = {"key": "user-1", "window_ms": 60000, "mode": "throttle"}
    first = queue.enqueue_deduped("report.send", {"n": 1}, dedupe=dedupe, queue="py-throttle")
    second = queue.enqueue_deduped("report.send", {"n": 2}, dedupe=dedupe, queue="py-throttle")
    assert first.outcome == "created"
    assert second == EnqueueResult(job_id=first.job_id, outcome="throttled")
    assert jobs_of(pool, "py-throttle") == [(first.job_id, {"n": 1}, "ready")]
    # enqueue takes the option too and answers the id.
    assert queue.enqueue("report.send", {"n": 3}, dedupe=dedupe, queue="py-throttle") == first.job_id


def test_debounce_the_last_call_wins(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    dedupe: DedupeOptions = {"key": "doc-1", "window_ms": 5000, "mode": "debounce"}
    first = queue.enqueue_deduped("search.reindex", {"v": 1}, dedupe=dedupe, queue="py-debounce")
    second = queue.enqueue_deduped("search.reindex", {"v": 2}, dedupe=dedupe, queue="py-debounce")
    assert (first.outcome, second) == ("created", EnqueueResult(job_id=first.job_id, outcome="debounced"))
    assert jobs_of(pool, "py-debounce") == [(first.job_id, {"v": 2}, "scheduled")]
    kept = queue.enqueue_deduped("t", {"v": 1}, dedupe={**dedupe, "replace": "runAt"}, queue="py-debounce")
    queue.enqueue_deduped("t", {"v": 2}, dedupe={**dedupe, "replace": "runAt"}, queue="py-debounce")
    assert [j for j in jobs_of(pool, "py-debounce") if j[0] == kept.job_id][0][1] == {"v": 1}


def test_rolls_back_with_the_callers_transaction(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    dedupe: DedupeOptions = {"key": "tx", "window_ms": 60000, "mode": "throttle"}
    with pool.connection() as conn:
        with conn.transaction(force_rollback=True):
            assert queue.enqueue_deduped("t", None, dedupe=dedupe, queue="py-tx", conn=conn).outcome == "created"
    assert jobs_of(pool, "py-tx") == []
    assert queue.enqueue_deduped("t", None, dedupe=dedupe, queue="py-tx").outcome == "created"


def test_threads_racing_one_debounced_key_make_one_job(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    dedupe: DedupeOptions = {"key": "race", "window_ms": 60000, "mode": "debounce"}
    results: list[EnqueueResult] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def run(name: str) -> None:
        start.wait()
        for n in range(10):
            r = queue.enqueue_deduped("t", {"from": name, "n": n}, dedupe=dedupe, queue="py-race")
            with lock:
                results.append(r)

    threads = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    jobs = jobs_of(pool, "py-race")
    assert len(jobs) == 1
    assert {r.job_id for r in results} == {jobs[0][0]}
    assert sorted(r.outcome for r in results) == ["created"] + ["debounced"] * 39
    assert jobs[0][1] in [{"from": f"t{i}", "n": 9} for i in range(4)]


@pytest.mark.parametrize(
    ("dedupe", "options", "field"),
    [
        ({"key": "", "window_ms": 1000, "mode": "throttle"}, {}, "dedupe.key"),
        ({"key": "k", "window_ms": 99, "mode": "throttle"}, {}, "dedupe.windowMs"),
        ({"key": "k", "window_ms": 1000, "mode": "later"}, {}, "dedupe.mode"),
        ({"key": "k", "window_ms": 1000, "mode": "throttle", "replace": "payload"}, {}, "dedupe.replace"),
        ({"key": "k", "window_ms": 1000, "mode": "throttle"}, {"idempotency_key": "i"}, "dedupe"),
    ],
)
def test_bad_options_are_refused_naming_the_field(
    pool: ConnectionPool[Any], dedupe: Any, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(WorkhorseValidationError) as raised:
        Queue(pool).enqueue_deduped("t", None, dedupe=dedupe, queue="py-bad", **options)
    assert raised.value.field == field
    assert jobs_of(pool, "py-bad") == []


async def test_async_psycopg(apool: AsyncConnectionPool[Any], pool: ConnectionPool[Any]) -> None:
    queue = AsyncQueue(apool)
    dedupe: DedupeOptions = {"key": "a", "window_ms": 60000, "mode": "debounce", "replace": "payload"}
    first = await queue.enqueue_deduped("t", {"v": 1}, dedupe=dedupe, queue="py-async")
    second = await queue.enqueue_deduped("t", {"v": 2}, dedupe=dedupe, queue="py-async")
    assert (first.outcome, second) == ("created", EnqueueResult(job_id=first.job_id, outcome="debounced"))
    assert jobs_of(pool, "py-async") == [(first.job_id, {"v": 2}, "scheduled")]


async def test_async_asyncpg_in_a_transaction(asyncpg_pool: Any, pool: ConnectionPool[Any]) -> None:
    queue = AsyncQueue(asyncpg_pool)
    dedupe: DedupeOptions = {"key": "b", "window_ms": 60000, "mode": "throttle"}
    async with asyncpg_pool.acquire() as conn:
        async with conn.transaction():
            first = await queue.enqueue_deduped("t", None, dedupe=dedupe, queue="py-asyncpg", conn=conn)
            second = await queue.enqueue_deduped("t", None, dedupe=dedupe, queue="py-asyncpg", conn=conn)
    assert (first.outcome, second) == ("created", EnqueueResult(job_id=first.job_id, outcome="throttled"))
    with pytest.raises(WorkhorseValidationError) as raised:
        await queue.enqueue_deduped("t", None, dedupe={"key": "b", "window_ms": 0, "mode": "throttle"}, queue="py-asyncpg")
    assert raised.value.field == "dedupe.windowMs"
    assert len(jobs_of(pool, "py-asyncpg")) == 1
