"""The worker capability reaches only what the jobs it holds need (issue 30, defect 8), as a
login role with the worker capability's grants (what ``grantRole(pool, role, 'worker')`` grants,
docs/security.md): a Python worker running as it reads its job's dependencies and keeps its own
registry row; the same role cannot read another job's dependencies, report or unregister
another worker's row, or clear an operator's drain: each is refused with ``NotYoursError``
(SQLSTATE P1040) and changes nothing."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from workhorse import Admin, HandlerContext, NotYoursError, Queue, Worker
from workhorse.errors import from_db_error

from .support import grant_capability_sql, wait_for

@pytest.fixture
def worker_url(db_url: str) -> Iterator[str]:
    """A login role with the worker capability's grants, as a URL on the test database."""
    role, password = f"wh_py_w_{secrets.token_hex(4)}", secrets.token_hex(12)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'".encode())
        conn.execute(grant_capability_sql(role, "worker"))
    parts = urlsplit(db_url)
    yield urlunsplit(parts._replace(netloc=f"{role}:{password}@{parts.hostname}:{parts.port}"))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {role}".encode())
        conn.execute(f"DROP ROLE {role}".encode())


def _refused(url: str, sql: str, params: tuple[Any, ...]) -> BaseException:
    with psycopg.connect(url) as conn:
        with pytest.raises(psycopg.Error) as raised:
            conn.execute(sql.encode(), params)
    return from_db_error(raised.value)


def _info(started_at: str = "2026-12-01T00:00:00Z") -> str:
    return f'{{"host": "h", "pid": 1, "queues": ["q"], "concurrency": 1, "version": "v", "startedAt": "{started_at}", "periodMs": 60000}}'


def test_a_worker_role_reads_the_dependencies_of_its_job_and_no_other(pool: ConnectionPool[Any], worker_url: str) -> None:
    queue, admin = Queue(pool), Admin(pool)
    first, second = queue.enqueue_many([{"type": "cap.one", "payload": 1}, {"type": "cap.two", "payload": 2, "depends_on": [0]}])
    seen: list[Any] = []
    with ConnectionPool(worker_url, min_size=1, max_size=4) as role_pool:
        worker = Worker(Queue(role_pool), poll_ms=50, tick_ms=200)

        @worker.handler("cap.one")
        def one(payload: Any, ctx: HandlerContext) -> int:
            return int(payload) * 10

        @worker.handler("cap.two")
        def two(payload: Any, ctx: HandlerContext) -> int:
            deps = ctx.dependencies()
            seen.append([(d.job_id, d.state, d.result) for d in deps])
            return int(str(deps[0].result)) + int(payload)

        worker.start()
        try:
            wait_for(lambda: (job := admin.get_job(second)) is not None and job.state == "succeeded", 30, "the dependent to succeed")
        finally:
            worker.stop()
    assert seen == [[(first, "succeeded", 10)]]
    # Not holding the job (it has ended; any worker id, any fence): refused, typed; v1 too.
    refused = _refused(worker_url, "SELECT * FROM workhorse.dependencies_v2(%s, 'w', 1)", (second,))
    assert isinstance(refused, NotYoursError) and refused.field == "jobId"
    assert isinstance(_refused(worker_url, "SELECT * FROM workhorse.dependencies_v1(%s)", (second,)), NotYoursError)


def test_a_worker_role_keeps_its_own_registry_row_and_cannot_touch_another(pool: ConnectionPool[Any], worker_url: str, db_url: str) -> None:
    admin = Admin(pool)
    with ConnectionPool(worker_url, min_size=1, max_size=4) as role_pool:
        worker = Worker(Queue(role_pool), worker_id="py-cap", heartbeat_ms=100, poll_ms=50)
        worker.start()
        try:
            wait_for(lambda: any(w.worker_id == "py-cap" for w in admin.list_workers()), 30, "the worker to register")
            with psycopg.connect(db_url) as conn:
                assert conn.execute("SELECT workhorse.drain_worker_v1('py-cap', 'ops')").fetchone() == ("requested",)
            for sql, params in (
                ("SELECT * FROM workhorse.report_worker_v2('py-cap', %s, 0, NULL)", (_info("2026-12-01T01:00:00Z"),)),
                ("SELECT * FROM workhorse.report_worker_v2('py-cap', %s, 0, 'guess')", (_info(),)),
                ("SELECT workhorse.unregister_worker_v2('py-cap', 'guess')", ()),
                ("SELECT workhorse.report_worker_v1('py-cap', %s, 0)", (_info("2026-12-01T02:00:00Z"),)),
            ):
                assert isinstance(_refused(worker_url, sql, params), NotYoursError), sql
            with psycopg.connect(worker_url) as conn:
                assert conn.execute("SELECT workhorse.unregister_worker_v1('py-cap')").fetchone() == (False,)
            wait_for(lambda: worker.drain_requested, 30, "the worker to hear the drain")
            row = next(w for w in admin.list_workers() if w.worker_id == "py-cap")
            assert row.drain_requested_by == "ops"
        finally:
            worker.stop()
    assert all(w.worker_id != "py-cap" for w in admin.list_workers())
