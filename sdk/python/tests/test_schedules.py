"""Schedules from Python alone: the shared cron vectors (sdk/protocol/cron-vectors.json) through the
server's evaluator; ``queue.sync_schedules`` and the admin calls (list, pause, resume, trigger,
history) with the server's typed refusals; and several Python worker processes ticking one
per-second schedule, synced by Python, for well over 100 occurrences: each fired exactly once
(the server plans; no TypeScript process anywhere)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from workhorse import Admin, Queue, ScheduleNotFoundError, Worker, WorkhorseValidationError

from .support import SRC, wait_for

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "protocol" / "cron-vectors.json").read_text())

OCCURRENCES_SQL = """SELECT ARRAY(SELECT to_char(u AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                     FROM unnest(workhorse.cron_occurrences(workhorse.cron_parse(%s, 'cron'), %s, %s, 'infinity', %s)) AS u)"""


def test_the_shared_cron_vectors(pool: ConnectionPool[Any]) -> None:
    with pool.connection() as conn:
        for vector in VECTORS["occurrences"]:
            row = conn.execute(OCCURRENCES_SQL, [vector["cron"], vector["timezone"], vector["after"], len(vector["expected"])]).fetchone()
            assert row is not None
            assert (vector["note"], row[0]) == (vector["note"], vector["expected"])


def test_sync_refuses_every_invalid_expression_of_the_vectors_naming_the_field(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    for vector in VECTORS["invalid"] + VECTORS["refusedExtensions"]:
        with pytest.raises(WorkhorseValidationError) as refused:
            queue.sync_schedules("py-invalid", [{"key": "ok", "type": "t", "cron": "@daily"}, {"key": "bad", "type": "t", "cron": vector["cron"]}])
        assert refused.value.field == "definitions[1].cron", vector
    with pytest.raises(WorkhorseValidationError) as zone:
        queue.sync_schedules("py-invalid", [{"key": "z", "type": "t", "cron": "@daily", "timezone": "Mars/Olympus_Mons"}])
    assert zone.value.field == "definitions[0].timezone"
    assert Admin(pool).list_schedules(namespace="py-invalid") == []


def test_sync_list_pause_resume_trigger_and_history(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    nightly = {"key": "nightly", "type": "py.report", "cron": "0 6 * * *", "timezone": "Europe/Berlin", "payload": {"format": "pdf"}}
    synced = queue.sync_schedules("py-ops", [nightly, {"key": "warm", "type": "py.warm", "cron": "*/5 * * * *"}], actor="deploy")
    assert [(s.key, s.change, s.revision) for s in synced] == [("nightly", "created", 1), ("warm", "created", 1)]
    assert [(s.key, s.change) for s in queue.sync_schedules("py-ops", [nightly])] == [("nightly", "unchanged"), ("warm", "disabled")]

    listed = {s.key: s for s in admin.list_schedules(namespace="py-ops")}
    assert listed["nightly"].state == "active" and listed["warm"].state == "disabled"
    assert listed["nightly"].definition["cron"] == "0 6 * * *"
    next_run = listed["nightly"].next_run_at
    assert next_run is not None and next_run.astimezone().utcoffset() is not None
    assert listed["warm"].next_run_at is None

    assert admin.pause_schedule("nightly", namespace="py-ops", actor="alice", reason="freeze") is True
    assert admin.pause_schedule("nightly", namespace="py-ops") is False
    job_id = admin.trigger_schedule("nightly", namespace="py-ops", actor="alice")
    assert admin.resume_schedule("nightly", namespace="py-ops") is True
    history = admin.get_schedule_history("nightly", namespace="py-ops")
    assert [(h.change, h.actor) for h in history] == [("resumed", None), ("triggered", "alice"), ("paused", "alice"), ("created", "deploy")]
    assert history[1].job_id == job_id
    with pool.connection() as conn:
        assert conn.execute("SELECT type, payload FROM workhorse.job WHERE id = %s", [job_id]).fetchone() == ("py.report", {"format": "pdf"})
    with pytest.raises(ScheduleNotFoundError):
        admin.pause_schedule("missing", namespace="py-ops")


WORKER = """
import signal, sys, threading
from psycopg_pool import ConnectionPool
from workhorse import Queue, Worker
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
with ConnectionPool(sys.argv[1], min_size=1, max_size=4) as pool:
    worker = Worker(Queue(pool), queues=["py-cron"], poll_ms=50, tick_ms=200, concurrency=4)
    worker.handle("py.cron", lambda payload, ctx: None)
    worker.start()
    print("ready", flush=True)
    stop.wait()
    worker.stop()
"""


@pytest.fixture
def worker_processes(db_url: str) -> Iterator[list[subprocess.Popen[str]]]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    started = [
        subprocess.Popen([sys.executable, "-c", WORKER, db_url], stdout=subprocess.PIPE, text=True, env=env) for _ in range(3)
    ]
    try:
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            if process.stdout:
                process.stdout.close()


@pytest.mark.timeout(300)
def test_python_worker_processes_fire_a_per_second_schedule_once_per_occurrence(
    pool: ConnectionPool[Any], worker_processes: list[subprocess.Popen[str]]
) -> None:
    for process in worker_processes:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    started = time.monotonic()
    Queue(pool).sync_schedules("py", [{"key": "every-second", "type": "py.cron", "cron": "* * * * * *", "options": {"queue": "py-cron"}}])

    def fired() -> int:
        with pool.connection() as conn:
            row = conn.execute(
                """SELECT count(*) FROM workhorse.schedule_occurrence o JOIN workhorse.schedule s ON s.id = o.schedule_id
                   WHERE s.namespace = 'py' AND o.state = 'fired'"""
            ).fetchone()
        return int(row[0]) if row else 0

    wait_for(lambda: fired() >= 130, 240, "130 fired occurrences")
    assert time.monotonic() - started >= 125  # one occurrence a second: the plan was topped up all along
    for process in worker_processes:
        assert process.poll() is None, "a worker process died"
        process.send_signal(signal.SIGTERM)
    for process in worker_processes:
        assert process.wait(60) == 0
    with pool.connection() as conn:
        occurrences = conn.execute(
            """SELECT o.at, o.state, o.job_id FROM workhorse.schedule_occurrence o JOIN workhorse.schedule s ON s.id = o.schedule_id
               WHERE s.namespace = 'py' AND o.state <> 'planned' ORDER BY o.at"""
        ).fetchall()
        jobs = conn.execute(
            """SELECT j.id, e.data ->> 'occurrence' FROM workhorse.job j
               JOIN workhorse.job_event e ON e.job_id = j.id AND e.kind = 'schedule_fired' WHERE j.type = 'py.cron'"""
        ).fetchall()
    fired_rows = [o for o in occurrences if o[1] == "fired"]
    # Every second from the first fired one on was fired (none missed, none skipped), each by one job.
    assert [o[1] for o in occurrences] == ["fired"] * len(occurrences)
    seconds = [int(o[0].timestamp()) for o in fired_rows]
    assert seconds == list(range(seconds[0], seconds[0] + len(seconds)))
    assert sorted(str(o[2]) for o in fired_rows) == sorted(str(j[0]) for j in jobs)
    assert len({j[1] for j in jobs}) == len(jobs)
    assert len(jobs) >= 130


async def test_the_async_queue_and_admin_sync_and_operate_schedules_through_asyncpg(asyncpg_pool: Any) -> None:
    from workhorse.aio import AsyncAdmin, AsyncQueue

    queue, admin = AsyncQueue(asyncpg_pool), AsyncAdmin(asyncpg_pool)
    synced = await queue.sync_schedules("py-async", [{"key": "a", "type": "py.async", "cron": "0 6 * * *", "timezone": "Asia/Tokyo"}])
    assert [(s.key, s.change) for s in synced] == [("a", "created")]
    [listed] = await admin.list_schedules(namespace="py-async")
    assert (listed.key, listed.state, listed.definition["timezone"]) == ("a", "active", "Asia/Tokyo")
    assert listed.next_run_at is not None
    assert await admin.pause_schedule("a", namespace="py-async") is True
    job_id = await admin.trigger_schedule("a", namespace="py-async")
    history = await admin.get_schedule_history("a", namespace="py-async")
    assert [h.change for h in history] == ["triggered", "paused", "created"] and history[0].job_id == job_id
    with pytest.raises(WorkhorseValidationError) as refused:
        await queue.sync_schedules("py-async", [{"key": "b", "type": "t", "cron": "61 * * * *"}])
    assert refused.value.field == "definitions[0].cron"
