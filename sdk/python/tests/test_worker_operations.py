"""Worker operations: every job event observable (``worker.on``) and logged at a fitting level (a
lost lease at WARNING), ``Worker``/``AsyncWorker`` as context managers, and ``python -m workhorse
worker module:attribute`` in a real process that drains on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import Admin, HandlerContext, NonRetryableError, Queue, Worker, WorkhorseValidationError
from workhorse.aio import AsyncAdmin, AsyncHandlerContext, AsyncQueue, AsyncWorker
from workhorse.events import WorkerEvent

from .support import wait_for

SRC = Path(__file__).resolve().parents[1] / "src"


def _ended(admin: Admin, *ids: str) -> bool:
    return all((j := admin.get_job(i)) is not None and j.finished_at is not None for i in ids)


def test_every_job_event_is_observable_and_logged(pool: ConnectionPool[Any], caplog: pytest.LogCaptureFixture) -> None:
    queue, admin = Queue(pool), Admin(pool)
    ok = queue.enqueue("ok", {})
    bad = queue.enqueue("bad", {})
    flaky = queue.enqueue("flaky", {}, retry_policy={"kind": "fixed", "delayMs": 0})
    unknown = queue.enqueue("nobody", {}, queue="default")
    events: list[WorkerEvent] = []
    failures: list[WorkerEvent] = []
    worker = Worker(queue, poll_ms=50, unknown_type_delay_ms=60_000)
    worker.on(events.append).on("job.failed", failures.append)
    worker.handle("ok", lambda payload, ctx: 1)

    def bad_handler(payload: Any, ctx: HandlerContext) -> None:
        raise NonRetryableError("no such account")

    def flaky_handler(payload: Any, ctx: HandlerContext) -> int:
        if ctx.attempt == 1:
            raise ValueError("once")
        return ctx.attempt

    worker.handle("bad", bad_handler).handle("flaky", flaky_handler)
    with caplog.at_level(logging.DEBUG, logger="workhorse"):
        with worker:
            wait_for(lambda: _ended(admin, ok, bad, flaky) and any(e.name == "job.released" for e in events), 20, "the jobs")
    names = [(e.name, e.job_id) for e in events]
    assert names[0] == ("worker.started", None) and names[-1] == ("worker.stopped", None)
    assert ("job.claimed", ok) in names and ("job.succeeded", ok) in names
    assert ("job.failed", bad) in names and ("job.released", unknown) in names
    assert [n for n, i in names if i == flaky] == ["job.claimed", "job.retry_scheduled", "job.claimed", "job.succeeded"]
    [failed] = failures
    assert failed.error["name"] == "NonRetryableError" and failed.duration_ms is not None and failed.attempt == 1
    assert failed.type == "bad" and failed.queue == "default" and failed.worker_id == worker.worker_id
    levels = {r.getMessage().split(": ", 1)[1].split(",")[0]: r.levelno for r in caplog.records if ": job." in r.getMessage()}
    assert levels["job.failed"] == logging.WARNING and levels["job.retry_scheduled"] == logging.INFO
    assert levels["job.succeeded"] == logging.DEBUG
    with pytest.raises(WorkhorseValidationError) as raised:
        worker.on("job.exploded", print)  # type: ignore[call-overload]
    assert raised.value.field == "name"


def test_a_lost_lease_is_an_event_and_a_warning(pool: ConnectionPool[Any], caplog: pytest.LogCaptureFixture) -> None:
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("stolen", {})
    lost: list[WorkerEvent] = []
    running = threading.Event()
    stolen = threading.Event()
    worker = Worker(queue, poll_ms=50).on("job.lease_lost", lost.append)

    @worker.handler("stolen")
    def handler(payload: Any, ctx: HandlerContext) -> None:
        running.set()
        stolen.wait(20)
        ctx.set_progress({"step": 2})  # the database answers stale: the lease is someone else's

    with caplog.at_level(logging.WARNING, logger="workhorse"), worker:
        assert running.wait(20)
        with pool.connection() as conn:
            conn.execute("UPDATE workhorse.job_runtime SET fence_token = fence_token + 1 WHERE job_id = %s", (job_id,))
        stolen.set()
        wait_for(lambda: lost, 20, "the lease_lost event")
    assert lost[0].job_id == job_id and lost[0].type == "stolen"
    assert any(r.levelno == logging.WARNING and "job.lease_lost" in r.getMessage() and job_id in r.getMessage() for r in caplog.records)
    job = admin.get_job(job_id)
    assert job is not None and job.state == "active"  # nothing recorded by the worker that lost it


async def test_an_async_worker_is_an_async_context_manager(apool: AsyncConnectionPool[Any]) -> None:
    queue, admin = AsyncQueue(apool), AsyncAdmin(apool)
    job_id = await queue.enqueue("double", {"n": 4})
    seen: list[str] = []

    async def double(payload: Any, ctx: AsyncHandlerContext) -> int:
        return int(payload["n"]) * 2

    import asyncio

    async with AsyncWorker(queue, poll_ms=50).handle("double", double).on(lambda e: seen.append(e.name)) as worker:
        assert worker.active_count >= 0
        for _ in range(1000):
            job = await admin.get_job(job_id)
            if job is not None and job.state == "succeeded":
                break
            await asyncio.sleep(0.02)
    job = await admin.get_job(job_id)
    assert job is not None and job.result == 8
    assert seen[0] == "worker.started" and seen[-1] == "worker.stopped"
    assert [w for w in await admin.list_workers() if w.worker_id == worker.worker_id] == []  # it left the registry


def test_the_command_line_runs_a_worker_from_an_import_path_and_drains_on_sigterm(db_url: str, pool: ConnectionPool[Any], tmp_path: Path) -> None:
    (tmp_path / "myjobs.py").write_text(textwrap.dedent('''
        import os, time
        from psycopg_pool import ConnectionPool
        from workhorse import Queue, Worker

        pool = ConnectionPool(os.environ["DATABASE_URL"], min_size=1, max_size=2, open=True)
        worker = Worker(Queue(pool), poll_ms=50)

        @worker.handler("slow")
        def slow(payload, ctx):
            time.sleep(payload["seconds"])
            return "finished"
    '''))
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("slow", {"seconds": 1.5}, queue="b")
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{tmp_path}", "DATABASE_URL": db_url}
    process = subprocess.Popen(
        [sys.executable, "-m", "workhorse", "worker", "myjobs:worker", "--queues", "a,b", "--concurrency", "20"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: (j := admin.get_job(job_id)) is not None and j.state == "active", 30, "the job to start")
        [info] = [w for w in admin.list_workers() if w.status == "running"]
        assert (info.queues, info.concurrency) == (["a", "b"], 20)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    job = admin.get_job(job_id)
    assert job is not None and (job.state, job.result) == ("succeeded", "finished")  # drained, not abandoned
    assert "worker.started" in err and "worker.stopped" in err
    assert [w for w in admin.list_workers() if w.worker_id == info.worker_id] == []


def test_the_command_line_says_what_is_wrong_with_an_import_path(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-m", "workhorse", "worker", "os:path"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "is not a Worker or AsyncWorker" in done.stderr
