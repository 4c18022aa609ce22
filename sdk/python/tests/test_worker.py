"""Worker behaviour beyond the conformance scenarios: LISTEN wake-up, heartbeats that keep a
long handler's lease, execution timeouts, unknown types, handler retry policies, errors whose
retry hints cannot be read, options."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import Admin, HandlerContext, Queue, Worker, WorkerStateError, WorkhorseValidationError
from workhorse.aio import AsyncAdmin, AsyncHandlerContext, AsyncQueue, AsyncWorker

from .support import wait_for


def _state(admin: Admin, job_id: str) -> str | None:
    job = admin.get_job(job_id)
    return None if job is None else job.state


def test_a_notification_wakes_an_idle_worker_long_before_its_next_poll(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    worker = Worker(queue, poll_ms=600_000, tick_ms=600_000)
    worker.handle("t", lambda payload, ctx: "done")
    worker.start()
    try:
        time.sleep(0.3)  # the worker's first, empty claim is behind it: only a notification wakes it now
        job_id = queue.enqueue("t", {})
        wait_for(lambda: _state(admin, job_id) == "succeeded", 20, "the notified job to run")
    finally:
        worker.stop()


def test_heartbeats_keep_the_lease_of_a_handler_that_outlives_it(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("slow", {})
    worker = Worker(queue, lease_ms=1000, poll_ms=50, tick_ms=50)

    @worker.handler("slow")
    def slow(payload: Any, ctx: HandlerContext) -> str:
        assert not ctx.signal.wait(3.0), f"aborted: {ctx.signal.reason!r}"
        return "finished"

    worker.start()
    try:
        wait_for(lambda: _state(admin, job_id) == "succeeded", 30, "the slow job")
    finally:
        worker.stop()
    job = admin.get_job(job_id)
    assert job is not None and job.current_attempt == 1 and job.result == "finished"


async def test_an_execution_timeout_cancels_a_coroutine_handler_and_closes_the_attempt(apool: AsyncConnectionPool[Any]) -> None:
    queue, admin = AsyncQueue(apool), AsyncAdmin(apool)
    job_id = await queue.enqueue("hang", {}, execution_timeout_ms=1000, max_attempts=1)
    # The worker ticks at start only: maintenance, which closes an attempt past its timeout
    # itself (as ExecutionTimeout), must not race the worker's own report, which is under test.
    worker = AsyncWorker(queue, poll_ms=50, tick_ms=600_000)
    reasons: list[str] = []

    @worker.handler("hang")
    async def hang(payload: Any, ctx: AsyncHandlerContext) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            reasons.append(type(ctx.signal.reason).__name__)

    task = asyncio.create_task(worker.run())
    try:
        for _ in range(400):
            job = await admin.get_job(job_id)
            if job is not None and job.state == "failed":
                break
            await asyncio.sleep(0.05)
    finally:
        await worker.stop()
        await task
    job = await admin.get_job(job_id)
    assert job is not None and job.state == "failed"
    assert job.error is not None and job.error["name"] == "ExecutionTimeoutError"
    assert reasons == ["ExecutionTimeoutError"]
    timeline = [f"{e.source}:{e.kind}" for e in (await admin.get_job_timeline(job_id)).items]
    assert timeline[-2:] == ["attempt:timeout", "event:failed"]


def test_a_job_of_an_unknown_type_is_released_without_consuming_an_attempt(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("nobody.handles.this", {})
    worker = Worker(queue, poll_ms=50, unknown_type_delay_ms=60_000)
    worker.handle("other", lambda payload, ctx: None)
    worker.start()
    try:
        wait_for(lambda: _state(admin, job_id) == "scheduled", 20, "the release")
    finally:
        worker.stop()
    # Attempt 1 closed as released: its number is used, its place in maxAttempts given back.
    job = admin.get_job(job_id)
    assert job is not None and job.current_attempt == 1 and job.max_attempts == 25
    assert [e.kind for e in admin.get_job_timeline(job_id).items][-2:] == ["released", "released"]


def test_the_handlers_retry_policy_applies_to_jobs_without_one(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("flaky", {})
    worker = Worker(queue, poll_ms=50)

    @worker.handler("flaky", retry={"kind": "fixed", "delayMs": 0})
    def flaky(payload: Any, ctx: HandlerContext) -> int:
        if ctx.attempt == 1:
            raise ValueError("once")
        return ctx.attempt

    worker.start()
    try:
        wait_for(lambda: _state(admin, job_id) == "succeeded", 20, "the retry")
    finally:
        worker.stop()
    retry = [e for e in admin.get_job_timeline(job_id).items if e.kind == "retry_scheduled"]
    assert retry[0].data is not None and retry[0].data["delaySource"] == "handler"
    error = retry[0].data["error"]
    assert isinstance(error, dict) and error["name"] == "ValueError" and "Traceback" in str(error["stack"])


class Unreadable(Exception):
    """An error whose retry hints raise when read (a property of the handler's own making)."""

    @property
    def retryable(self) -> bool:
        raise RuntimeError("retryable cannot be read")

    @property
    def retry_delay_ms(self) -> int:
        raise LookupError("retry_delay_ms cannot be read")


def test_an_error_whose_retry_hints_raise_is_still_recorded_by_the_worker(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("unreadable", {}, max_attempts=1)
    # A minute's lease: a failure left to lease expiry would not be seen within the wait.
    worker = Worker(queue, poll_ms=50, lease_ms=60_000)

    @worker.handler("unreadable")
    def unreadable(payload: Any, ctx: HandlerContext) -> None:
        raise Unreadable("hints unreadable")

    worker.start()
    try:
        wait_for(lambda: _state(admin, job_id) == "failed", 20, "the failure, recorded by the worker")
    finally:
        worker.stop()
    job = admin.get_job(job_id)
    assert job is not None and job.error is not None
    assert job.error["name"] == "Unreadable" and job.error["message"] == "hints unreadable"


class Hostile(Exception):
    pass


def test_hostile_error_text_is_sent_as_it_is_and_stored_as_the_database_bounds_it(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("hostile", {}, max_attempts=1)
    worker = Worker(queue, poll_ms=50, lease_ms=60_000)
    # Control characters, a NUL and a lone surrogate (PostgreSQL stores neither of the last two).
    message = "\x01\x1f" * 40_000 + "\x00\udc80"

    @worker.handler("hostile")
    def hostile(payload: Any, ctx: HandlerContext) -> None:
        raise Hostile(message)

    worker.start()
    try:
        wait_for(lambda: _state(admin, job_id) == "failed", 20, "the failure, recorded by the worker")
    finally:
        worker.stop()
    job = admin.get_job(job_id)
    assert job is not None and job.error is not None
    assert job.error["name"] == "Hostile"
    # workhorse.bounded_error: 32,768 characters kept, the cut says so (the same for every SDK).
    assert job.error["message"] == message[:32_768] + "… [truncated: 32768 of 80002 characters kept]"
    assert job.error["stack"].endswith("characters kept]")


def test_worker_options_and_registrations_are_checked(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    with pytest.raises(WorkhorseValidationError) as raised:
        Worker(queue, lease_ms=10)
    assert raised.value.field == "leaseMs"
    with pytest.raises(WorkhorseValidationError):
        Worker(queue, queues=[])
    worker = Worker(queue)
    worker.handle("t", lambda payload, ctx: None)
    with pytest.raises(WorkerStateError):
        worker.handle("t", lambda payload, ctx: None)
    with pytest.raises(WorkhorseValidationError) as raised:
        worker.handle("t2", lambda payload, ctx: None, retry={"kind": "sometimes"})  # type: ignore[call-overload]
    assert raised.value.field == "retry.kind"
