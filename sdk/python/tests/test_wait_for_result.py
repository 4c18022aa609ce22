"""wait_for_result (issue 34 item 3): the result or the typed end of a job another connection
finishes, woken by the notification; a timeout leaves the job running; a producer learns
nothing of another role's job. Sync, async Psycopg and asyncpg."""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import (
    JobCanceledError,
    JobFailedError,
    JobNotFoundError,
    JobResultCanceledError,
    Queue,
    WaitForResultTimeoutError,
    WorkhorseValidationError,
)
from workhorse._result_wait import POLL_SECONDS
from workhorse.aio import AsyncQueue

from .support import grant_capability_sql, wait_for


def _claim(url: str, queue: str) -> tuple[str, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT job_id::text, fence_token FROM workhorse.claim_many_v1(%s, 'py-wait-worker', 1, 60000)", ([queue],)).fetchone()
    assert row is not None
    return row[0], str(row[1])


def _complete(url: str, queue: str, result: Any) -> None:
    job_id, fence = _claim(url, queue)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT workhorse.complete_v1(%s, 'py-wait-worker', %s, %s::jsonb)", (job_id, int(fence), json.dumps(result)))


def _fail(url: str, queue: str) -> None:
    job_id, fence = _claim(url, queue)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT * FROM workhorse.fail_v1(%s, 'py-wait-worker', %s, %s::jsonb, '{}'::jsonb)",
            (job_id, int(fence), json.dumps({"name": "KeyError", "message": "no invoice"})),
        )


def _registered(url: str, job_id: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM workhorse.result_waiter WHERE job_id = %s", (job_id,)).fetchone() is not None


def _after_registration(url: str, job_id: str, then: Any) -> threading.Thread:
    def run() -> None:
        wait_for(lambda: _registered(url, job_id) or None, 10, "the registration")
        then()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_sync_wakes_on_the_notification_of_a_completion(pool: ConnectionPool[Any], db_url: str) -> None:
    queue = Queue(pool)
    job_id = queue.enqueue("py.wait", {"n": 2}, queue="py-wait")
    thread = _after_registration(db_url, job_id, lambda: _complete(db_url, "py-wait", {"doubled": 4}))
    started = time.monotonic()
    assert queue.wait_for_result(job_id, timeout=30) == {"doubled": 4}
    thread.join()
    # Woken by the notification, not the fallback poll.
    assert time.monotonic() - started < POLL_SECONDS
    assert not _registered(db_url, job_id)
    # An ended job answers at once.
    assert queue.wait_for_result(job_id) == {"doubled": 4}


def test_sync_typed_ends_timeout_and_bad_input(pool: ConnectionPool[Any], db_url: str) -> None:
    queue = Queue(pool)
    dead = queue.enqueue("py.wait", {}, queue="py-wait-dead", max_attempts=1)
    thread = _after_registration(db_url, dead, lambda: _fail(db_url, "py-wait-dead"))
    with pytest.raises(JobFailedError) as failed:
        queue.wait_for_result(dead, timeout=30)
    thread.join()
    assert failed.value.job_error == {"name": "KeyError", "message": "no invoice"}

    canceled = queue.enqueue("py.wait", {}, queue="py-wait-cancel")
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("SELECT workhorse.cancel_v1(%s, 'ops')", (canceled,))
    with pytest.raises(JobResultCanceledError) as cancel:
        queue.wait_for_result(canceled)
    assert isinstance(cancel.value, JobCanceledError)
    assert cancel.value.job_error["name"] == "Canceled"

    slow = queue.enqueue("py.wait", {}, queue="py-wait-slow")
    with pytest.raises(WaitForResultTimeoutError):
        queue.wait_for_result(slow, timeout=0.2)
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute("SELECT state FROM workhorse.job_runtime WHERE job_id = %s", (slow,)).fetchone()
    assert row == ("ready",)

    with pytest.raises(WorkhorseValidationError) as bad:
        queue.wait_for_result("nope")
    assert bad.value.field == "jobId"
    with pytest.raises(WorkhorseValidationError) as bad:
        queue.wait_for_result(slow, timeout=-1)
    assert bad.value.field == "timeout"


@pytest.fixture
def other_producer(db_url: str) -> Iterator[str]:
    role, password = f"wh_py_wait_{secrets.token_hex(4)}", secrets.token_hex(12)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'".encode())
        conn.execute(grant_capability_sql(role, "producer"))
    parts = urlsplit(db_url)
    yield urlunsplit(parts._replace(netloc=f"{role}:{password}@{parts.hostname}:{parts.port}"))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {role}".encode())
        conn.execute(f"DROP ROLE {role}".encode())


def test_a_foreign_job_is_not_revealed(pool: ConnectionPool[Any], db_url: str, other_producer: str) -> None:
    job_id = Queue(pool).enqueue("py.wait", {}, queue="py-wait-private")
    with ConnectionPool(other_producer, min_size=1, max_size=2) as other:
        with pytest.raises(JobNotFoundError):
            Queue(other).wait_for_result(job_id, timeout=5)
        assert not _registered(db_url, job_id)
        _complete(db_url, "py-wait-private", "secret")
        with pytest.raises(JobNotFoundError):
            Queue(other).wait_for_result(job_id, timeout=5)


async def _async_case(queue: AsyncQueue, db_url: str) -> None:
    job_id = await queue.enqueue("py.wait", {"n": 1}, queue="py-wait-async")
    thread = _after_registration(db_url, job_id, lambda: _complete(db_url, "py-wait-async", [1, 2]))
    started = time.monotonic()
    assert await queue.wait_for_result(job_id, timeout=30) == [1, 2]
    await asyncio.to_thread(thread.join)
    assert time.monotonic() - started < POLL_SECONDS
    slow = await queue.enqueue("py.wait", {}, queue="py-wait-async-slow")
    with pytest.raises(WaitForResultTimeoutError):
        await queue.wait_for_result(slow, timeout=0.2)
    # Cancelling the waiting task ends the wait and frees its connection.
    task = asyncio.create_task(queue.wait_for_result(slow))
    await asyncio.to_thread(wait_for, lambda: _registered(db_url, slow) or None, 10, "the registration")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_async_psycopg(apool: AsyncConnectionPool[Any], db_url: str) -> None:
    await _async_case(AsyncQueue(apool), db_url)


async def test_async_asyncpg(asyncpg_pool: Any, db_url: str) -> None:
    await _async_case(AsyncQueue(asyncpg_pool), db_url)
