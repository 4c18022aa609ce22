"""The login role beside the actor (issue 30, item 9): a queue's pause and resume, a drain request
and a schedule's history read back, through this SDK's Admin (``list_queues_v2``,
``list_workers_v2``, ``get_schedule_history_v2``), with the login role of the operator session
that made each change, which no caller chooses."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from workhorse import Admin, Queue
from workhorse.aio import AsyncAdmin

from .support import grant_capability_sql


@pytest.fixture
def operator(db_url: str) -> Iterator[tuple[str, str]]:
    """A login role with the operator capability's grants: (role, URL on the test database)."""
    role, password = f"wh_py_ops_{secrets.token_hex(4)}", secrets.token_hex(12)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'".encode())
        conn.execute(grant_capability_sql(role, "operator"))
    parts = urlsplit(db_url)
    yield role, urlunsplit(parts._replace(netloc=f"{role}:{password}@{parts.hostname}:{parts.port}"))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {role}".encode())
        conn.execute(f"DROP ROLE {role}".encode())


def _session_user(pool: ConnectionPool[Any]) -> str:
    with pool.connection() as conn:
        row = conn.execute("SELECT session_user::text").fetchone()
    assert row is not None
    return str(row[0])


def test_queue_pause_and_resume_show_the_login_role_of_each_change(pool: ConnectionPool[Any], operator: tuple[str, str]) -> None:
    role, url = operator
    Queue(pool).enqueue("t", {}, queue="py-attr")
    with ConnectionPool(url, min_size=1, max_size=2) as ops_pool:
        Admin(ops_pool).pause_queue("py-attr", actor="oncall", reason="outage")
        [info] = [q for q in Admin(pool).list_queues() if q.queue == "py-attr"]
        assert (info.paused, info.changed_by, info.login_role, info.reason) == (True, "oncall", role, "outage")
    # Another login, naming the same actor, shows as itself.
    Admin(pool).resume_queue("py-attr", actor="oncall")
    [info] = [q for q in Admin(pool).list_queues() if q.queue == "py-attr"]
    assert (info.paused, info.changed_by, info.login_role) == (False, "oncall", _session_user(pool))


async def test_a_drain_request_shows_the_login_role_that_asked(pool: ConnectionPool[Any], asyncpg_pool: Any, operator: tuple[str, str]) -> None:
    role, url = operator
    info = '{"host": "h", "pid": 1, "queues": ["q"], "concurrency": 1, "version": "v", "startedAt": "2026-12-01T00:00:00Z", "periodMs": 60000}'
    with pool.connection() as conn:
        conn.execute("SELECT * FROM workhorse.report_worker_v2('py-attr-w', %s::jsonb, 0, NULL)", (info,))
    with ConnectionPool(url, min_size=1, max_size=2) as ops_pool:
        assert Admin(ops_pool).drain_worker("py-attr-w", actor="deploy", reason="maintenance") == "requested"
    [worker] = [w for w in await AsyncAdmin(asyncpg_pool).list_workers() if w.worker_id == "py-attr-w"]
    assert (worker.drain_requested_by, worker.drain_login_role, worker.drain_reason) == ("deploy", role, "maintenance")


def test_the_schedule_history_shows_the_login_role_of_each_change(pool: ConnectionPool[Any], operator: tuple[str, str]) -> None:
    role, url = operator
    Queue(pool).sync_schedules("py-attr", [{"key": "nightly", "type": "py.report", "cron": "0 6 * * *"}], actor="deploy")
    with ConnectionPool(url, min_size=1, max_size=2) as ops_pool:
        assert Admin(ops_pool).pause_schedule("nightly", namespace="py-attr", actor="alice") is True
        history = Admin(ops_pool).get_schedule_history("nightly", namespace="py-attr")
    assert [(h.change, h.actor, h.login_role) for h in history] == [("paused", "alice", role), ("created", "deploy", _session_user(pool))]
