"""Testing helpers, as Oban.Testing and rivertest offer them, over a real database:

* ``drain(worker)`` runs a worker until its queues hold no ready job and none runs, then stops
  it, and says what ran (``drain_async`` for an ``AsyncWorker``);
* ``wait_for_state(pool, job_id, "succeeded")`` waits until a job reaches a state (or one of
  several) and returns its snapshot (``wait_for_state_async``);
* ``list_enqueued(pool, type=..., queue=...)`` lists the jobs enqueued, oldest first, with their
  payloads (``list_enqueued_async``), and ``assert_enqueued`` says which one matches.

Pytest fixtures for a fresh test database are in ``workhorse.pytest_plugin``.

Example::

    queue.enqueue("email.send", {"to": "a@example.com"})
    [job] = list_enqueued(pool, type="email.send")
    assert job.payload == {"to": "a@example.com"}
    report = drain(worker)
    assert report.succeeded == 1
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import ConnectionPool

from .admin import Admin
from .aio import AsyncAdmin, AsyncWorker
from .events import WorkerEvent
from .types import JobSnapshot, JobState
from .worker import Worker

__all__ = [
    "Drained",
    "assert_enqueued",
    "drain",
    "drain_async",
    "list_enqueued",
    "list_enqueued_async",
    "wait_for_state",
    "wait_for_state_async",
]

_POLL_S = 0.02


@dataclass
class Drained:
    """What a drain ran: the jobs by how their attempt ended, and every event in order."""

    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    canceled: int = 0
    #: Parked (asleep, or waiting for children, a signal or a decision).
    parked: int = 0
    events: list[WorkerEvent] = field(default_factory=list)

    def _add(self, event: WorkerEvent) -> None:
        self.events.append(event)
        counter = {
            "job.succeeded": "succeeded", "job.failed": "failed", "job.retry_scheduled": "retried",
            "job.canceled": "canceled", "job.sleeping": "parked", "job.blocked": "parked",
        }.get(event.name)  # fmt: skip
        if counter is not None:
            setattr(self, counter, getattr(self, counter) + 1)


def _idle(queues: Sequence[Any], names: Sequence[str]) -> bool:
    return all(q.ready == 0 and q.active == 0 for q in queues if q.queue in names)


def drain(worker: Worker, *, timeout: float = 30.0) -> Drained:
    """Runs ``worker`` (not running yet) until its queues hold no ready job and none is active,
    then stops it and returns what ran. Jobs scheduled for later (a retry's backoff, ``run_at``)
    stay. Raises ``TimeoutError`` after ``timeout`` seconds (the worker is stopped)."""
    admin = Admin(worker.queue.pool)
    report = Drained()
    worker.on(report._add)
    names = worker._options.queues
    deadline = time.monotonic() + timeout
    with worker:
        while not (_idle(admin.list_queues(), names) and worker.active_count == 0):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the queues {names} did not drain within {timeout} s")
            time.sleep(_POLL_S)
    return report


async def drain_async(worker: AsyncWorker, *, timeout: float = 30.0) -> Drained:
    """``drain`` for an ``AsyncWorker``."""
    admin = AsyncAdmin(worker.queue.pool)
    report = Drained()
    worker.on(report._add)
    names = worker._options.queues
    deadline = time.monotonic() + timeout
    async with worker:
        while not (_idle(await admin.list_queues(), names) and worker.active_count == 0):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the queues {names} did not drain within {timeout} s")
            await asyncio.sleep(_POLL_S)
    return report


def _states(state: JobState | Sequence[JobState]) -> set[str]:
    return {state} if isinstance(state, str) else set(state)


def wait_for_state(pool: ConnectionPool[Any], job_id: str, state: JobState | Sequence[JobState], *, timeout: float = 30.0) -> JobSnapshot:
    """Waits until the job is in ``state`` (or one of the states given) and returns its snapshot.
    Raises ``TimeoutError`` naming the state it was in after ``timeout`` seconds."""
    admin, wanted = Admin(pool), _states(state)
    deadline = time.monotonic() + timeout
    while True:
        job = admin.get_job(job_id)
        if job is not None and job.state in wanted:
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} is {None if job is None else job.state}, not {sorted(wanted)}, after {timeout} s")
        time.sleep(_POLL_S)


async def wait_for_state_async(pool: Any, job_id: str, state: JobState | Sequence[JobState], *, timeout: float = 30.0) -> JobSnapshot:
    """``wait_for_state`` on an async pool (Psycopg or asyncpg)."""
    admin, wanted = AsyncAdmin(pool), _states(state)
    deadline = time.monotonic() + timeout
    while True:
        job = await admin.get_job(job_id)
        if job is not None and job.state in wanted:
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} is {None if job is None else job.state}, not {sorted(wanted)}, after {timeout} s")
        await asyncio.sleep(_POLL_S)


def list_enqueued(
    pool: ConnectionPool[Any], *, type: str | None = None, queue: str | None = None, states: Sequence[JobState] | None = None
) -> list[JobSnapshot]:
    """The jobs enqueued (of one type, queue, states), oldest first."""
    admin, jobs, cursor = Admin(pool), [], None
    while True:
        page = admin.list_jobs(type=type, queue=queue, states=states, limit=1000, cursor=cursor)
        jobs += page.items
        if page.next_cursor is None:
            return jobs[::-1]
        cursor = page.next_cursor


async def list_enqueued_async(
    pool: Any, *, type: str | None = None, queue: str | None = None, states: Sequence[JobState] | None = None
) -> list[JobSnapshot]:
    """``list_enqueued`` on an async pool (Psycopg or asyncpg)."""
    admin, jobs, cursor = AsyncAdmin(pool), [], None
    while True:
        page = await admin.list_jobs(type=type, queue=queue, states=states, limit=1000, cursor=cursor)
        jobs += page.items
        if page.next_cursor is None:
            return jobs[::-1]
        cursor = page.next_cursor


def assert_enqueued(
    pool: ConnectionPool[Any], *, type: str, payload: Mapping[str, Any] | None = None, queue: str | None = None
) -> JobSnapshot:
    """The one job of ``type`` (in ``queue``) whose payload contains ``payload``'s keys with
    their values; an ``AssertionError`` listing what was enqueued when there is none or more."""
    jobs = list_enqueued(pool, type=type, queue=queue)
    matching = [
        j for j in jobs
        if payload is None or (isinstance(j.payload, Mapping) and all(j.payload.get(k) == v for k, v in payload.items()))
    ]  # fmt: skip
    if len(matching) != 1:
        seen = [(j.queue, j.payload) for j in jobs]
        raise AssertionError(f"expected one {type} job with payload {payload}, found {len(matching)}; enqueued: {seen}")
    return matching[0]
