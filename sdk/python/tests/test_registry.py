"""A Python worker in the registry of live workers (sql/095_workers.sql), read through
``list_workers_v1`` as ``admin.listWorkers()`` and ``workhorse workers list`` read it (and this
SDK's ``Admin.list_workers``): it reports itself with its language, honours an operator's drain
request (claims no more, finishes what it holds, then shows ``drained``), and leaves the
registry when it stops."""

from __future__ import annotations

import os
import threading
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from workhorse import Admin, HandlerContext, Queue, Worker, WorkhorseValidationError
from workhorse.aio import AsyncAdmin

from .support import wait_for


def _registry(url: str) -> dict[str, dict[str, Any]]:
    with psycopg.connect(url) as conn:
        cursor = conn.execute(
            "SELECT worker_id, status, pid, queues, concurrency, in_flight, version, drain_requested_by "
            "FROM workhorse.list_workers_v1()"
        )
        names = [c.name for c in cursor.description or []]
        return {row[0]: dict(zip(names, row)) for row in cursor.fetchall()}


def _drain(url: str, worker_id: str) -> str:
    with psycopg.connect(url) as conn:
        return str(conn.execute("SELECT workhorse.drain_worker_v1(%s, 'ops', 'maintenance')", (worker_id,)).fetchone()[0])  # type: ignore[index]


def test_a_python_worker_registers_drains_on_request_and_leaves_the_registry(pool: ConnectionPool[Any], db_url: str) -> None:
    queue, admin = Queue(pool), Admin(pool)
    release = threading.Event()
    worker = Worker(queue, worker_id="py-registered", queues=["default", "mail"], concurrency=3, heartbeat_ms=200, poll_ms=50)

    @worker.handler("hold")
    def hold(payload: Any, ctx: HandlerContext) -> str:
        assert release.wait(30)
        return "held"

    first = queue.enqueue("hold", {})
    worker.start()
    try:
        wait_for(lambda: _registry(db_url).get("py-registered", {}).get("in_flight") == 1, 30, "the worker's report")
        row = _registry(db_url)["py-registered"]
        assert row["status"] == "running" and row["version"].startswith("python/")
        assert row["pid"] == os.getpid() and row["queues"] == ["default", "mail"] and row["concurrency"] == 3

        assert _drain(db_url, "py-registered") == "requested"
        wait_for(lambda: worker.drain_requested, 30, "the worker to hear the drain request")
        second = queue.enqueue("hold", {})
        assert _registry(db_url)["py-registered"]["status"] == "draining"
        release.set()
        wait_for(lambda: _registry(db_url)["py-registered"]["status"] == "drained", 30, "the registry to show it drained")
        job = admin.get_job(first)
        assert job is not None and job.state == "succeeded"
        waiting = admin.get_job(second)
        assert waiting is not None and waiting.state == "ready" and waiting.current_attempt == 0
        assert _registry(db_url)["py-registered"]["drain_requested_by"] == "ops"
    finally:
        release.set()
        worker.stop()
    assert "py-registered" not in _registry(db_url)


async def test_admin_lists_workers_and_asks_one_to_drain(pool: ConnectionPool[Any], asyncpg_pool: Any) -> None:
    admin, aadmin = Admin(pool), AsyncAdmin(asyncpg_pool)
    worker = Worker(Queue(pool), worker_id="py-listed", heartbeat_ms=200, poll_ms=50)
    worker.start()
    try:
        wait_for(lambda: [w for w in admin.list_workers() if w.worker_id == "py-listed"], 30, "the worker's report")
        [info] = [w for w in await aadmin.list_workers() if w.worker_id == "py-listed"]
        assert info.status == "running" and info.queues == ["default"] and info.version.startswith("python/")
        assert info.drain_requested_at is None and info.last_seen_at >= info.started_at
        assert admin.drain_worker("py-listed", actor="alice", reason="host maintenance") == "requested"
        assert await aadmin.drain_worker("py-listed") == "already_requested"
        wait_for(lambda: worker.drain_requested, 30, "the drain request")
        [info] = [w for w in admin.list_workers() if w.worker_id == "py-listed"]
        assert info.drain_requested_by == "alice" and info.drain_reason == "host maintenance"
    finally:
        worker.stop()
    assert admin.drain_worker("py-listed") == "not_found"
    with pytest.raises(WorkhorseValidationError) as refused:
        admin.drain_worker("")
    assert refused.value.field == "workerId"
