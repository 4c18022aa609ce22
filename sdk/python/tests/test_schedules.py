"""Schedules in a deployment of Python workers only: occurrences planned in SQL (as the TypeScript
planner writes them, with ``plan_schedule_v1``) are fired by the Python worker's maintenance tick,
one job per occurrence, with the definition's payload and queue."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from psycopg_pool import ConnectionPool

from workhorse import Queue, Worker

from .support import wait_for


def test_a_python_worker_fires_the_planned_occurrences_once_each(pool: ConnectionPool[Any]) -> None:
    definition = {"key": "py.every-second", "type": "py.cron", "cron": "* * * * * *", "payload": {"n": 1}, "options": {"queue": "py-cron"}}
    with pool.connection() as conn:
        changes = conn.execute("SELECT key, change FROM workhorse.sync_schedules_v1('py', %s::jsonb)", [json.dumps([definition])]).fetchall()
        assert changes == [("py.every-second", "created")]
        row = conn.execute("SELECT schedule_id, revision, planned_through FROM workhorse.schedules_to_plan_v1(100, 'py')").fetchone()
        assert row is not None
        schedule_id, revision, planned_through = row
        # The next five whole seconds, as the cron library would plan '* * * * * *'.
        first = planned_through.replace(microsecond=0) + timedelta(seconds=1)
        occurrences = [first + timedelta(seconds=i) for i in range(5)]
        status = conn.execute(
            "SELECT workhorse.plan_schedule_v1(%s, %s, %s, %s::timestamptz[], NULL)", [schedule_id, revision, planned_through, occurrences]
        ).fetchone()
        assert status == ("planned",)

    ran: list[Any] = []
    worker = Worker(Queue(pool), queues=["py-cron"], poll_ms=50, tick_ms=100)
    worker.handle("py.cron", lambda payload, ctx: ran.append(payload))
    worker.start()
    try:
        wait_for(lambda: len(ran) >= 5, 30, "five scheduled jobs to run")
    finally:
        worker.stop()

    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT o.at, o.state, o.job_id FROM workhorse.schedule_occurrence o WHERE o.schedule_id = %s ORDER BY o.at", [schedule_id]
        ).fetchall()
        jobs = conn.execute("SELECT j.id, j.queue FROM workhorse.job j WHERE j.type = 'py.cron'").fetchall()
    assert [(at, state) for at, state, _ in rows] == [(at, "fired") for at in occurrences]
    assert sorted(str(job_id) for _, _, job_id in rows) == sorted(str(job_id) for job_id, _ in jobs)
    assert {queue for _, queue in jobs} == {"py-cron"}
    assert ran == [{"n": 1}] * 5
