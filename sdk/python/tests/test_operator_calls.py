"""The operator calls Python shares with TypeScript's Admin beyond single jobs (checkpoints,
signals and waits of a job, queue activity, operator changes, health, retention), a producer's
read of its own job, and the registration of handler retry policies."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import Admin, HandlerContext, Queue, Worker, WorkhorseValidationError
from workhorse.aio import AsyncAdmin, AsyncQueue

from .support import grant_capability_sql, wait_for


@pytest.fixture
def producer(db_url: str) -> Iterator[str]:
    """A login role with the producer capability's grants only, as a URL on the test database."""
    role, password = f"wh_py_prod_{secrets.token_hex(4)}", secrets.token_hex(12)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'".encode())
        conn.execute(grant_capability_sql(role, "producer"))
    parts = urlsplit(db_url)
    yield urlunsplit(parts._replace(netloc=f"{role}:{password}@{parts.hostname}:{parts.port}"))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {role}".encode())
        conn.execute(f"DROP ROLE {role}".encode())


def test_a_producer_reads_its_own_job_and_not_others(pool: ConnectionPool[Any], producer: str) -> None:
    other = Queue(pool).enqueue("t", {"by": "owner"})
    with ConnectionPool(producer, min_size=1, max_size=2) as producer_pool:
        queue = Queue(producer_pool)
        mine = queue.enqueue("t", {"by": "producer"}, queue="own")
        job = queue.get_job(mine)
        assert job is not None and (job.id, job.state, job.queue, job.payload) == (mine, "ready", "own", {"by": "producer"})
        assert queue.get_job(other) is None
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            Admin(producer_pool).get_job(mine)
    with pytest.raises(WorkhorseValidationError) as raised:
        Queue(pool).get_job("not-a-uuid")
    assert raised.value.field == "jobId"


async def test_the_async_queue_reads_its_own_job(apool: AsyncConnectionPool[Any]) -> None:
    queue = AsyncQueue(apool)
    job_id = await queue.enqueue("t", {"n": 1})
    job = await queue.get_job(job_id)
    assert job is not None and job.payload == {"n": 1}


def test_checkpoints_signals_and_waits_of_a_job(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("steps", {})
    assert queue.send_signal(job_id, "go", {"x": 1}) == "buffered"
    worker = Worker(queue, poll_ms=50)

    @worker.handler("steps")
    def steps(payload: Any, ctx: HandlerContext) -> str:
        ctx.checkpoint("first", lambda: {"a": 1})
        ctx.wait_for_signal("go")
        return "done"

    worker.start()
    try:
        wait_for(lambda: (j := admin.get_job(job_id)) is not None and j.state == "succeeded", 20, "the job to succeed")
    finally:
        worker.stop()
    [checkpoint] = admin.list_checkpoints(job_id)
    assert (checkpoint.name, checkpoint.value, checkpoint.attempt, checkpoint.worker_id) == ("first", {"a": 1}, 1, worker.worker_id)
    [signal] = admin.list_job_signals(job_id)
    assert (signal.name, signal.payload, signal.status, signal.wait_seq) == ("go", {"x": 1}, "consumed", 1)
    [wait] = admin.list_job_waits(job_id)
    assert (wait.kind, wait.name, wait.status, wait.signal_id) == ("signal", "go", "delivered", signal.id)
    with pytest.raises(WorkhorseValidationError) as raised:
        admin.list_job_waits(job_id, limit=0)
    assert raised.value.field == "limit"


def test_queue_activity_counts_finished_jobs_per_bucket(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    for _ in range(2):
        admin.cancel(queue.enqueue("t", {}, queue="act"))
    since = datetime.now(timezone.utc) - timedelta(hours=1)
    rows = [r for r in admin.queue_activity(since=since, bucket_seconds=3600) if r.queue == "act"]
    assert sum(r.canceled for r in rows) == 2 and sum(r.succeeded + r.failed for r in rows) == 0
    with pytest.raises(WorkhorseValidationError) as raised:
        admin.queue_activity(since=datetime.now(), bucket_seconds=60)
    assert raised.value.field == "since"


def test_operator_changes_list_who_changed_a_setting(pool: ConnectionPool[Any]) -> None:
    admin = Admin(pool)
    admin.pause_queue("changes", actor="alice", reason="incident")
    admin.resume_queue("changes", actor="bob")
    changes = admin.list_operator_changes(subject="changes")
    assert [(c.kind, c.actor, c.reason) for c in changes] == [("queue_resumed", "bob", None), ("queue_paused", "alice", "incident")]
    assert admin.list_operator_changes(subject="changes", before_id=changes[0].id)[0].id == changes[1].id
    with pytest.raises(WorkhorseValidationError) as raised:
        admin.list_operator_changes(kind="queue_exploded")
    assert raised.value.field == "kind"


def test_health_reports_a_status_and_checks_its_thresholds(pool: ConnectionPool[Any]) -> None:
    admin = Admin(pool)
    Queue(pool).enqueue("t", {}, queue="health")
    report = admin.health({"readyWithoutWorkers": {"warn": 1, "critical": 1}})
    assert report["status"] == "critical"
    reasons = report["reasons"]
    assert isinstance(reasons, list) and any(isinstance(r, dict) and r["code"] == "ready_without_workers" for r in reasons)
    with pytest.raises(WorkhorseValidationError) as raised:
        admin.health({"nope": {"warn": 1}})  # type: ignore[arg-type]
    assert raised.value.field == "thresholds.nope"


async def test_retention_status_set_and_run(apool: AsyncConnectionPool[Any]) -> None:
    admin = AsyncAdmin(apool)
    await admin.set_retention({"enabled": True, "finishedJobMs": 86_400_000}, actor="alice")
    status = await admin.retention_status()
    policy = status["policy"]
    assert isinstance(policy, dict) and policy["enabled"] is True and policy["finishedJobMs"] == 86_400_000
    run = await admin.run_retention(budget=100)
    assert isinstance(run, dict)
    [change] = await admin.list_operator_changes(kind="retention_set")
    assert change.actor == "alice"
    with pytest.raises(WorkhorseValidationError) as raised:
        await admin.set_retention({"enabled": "yes"})  # type: ignore[typeddict-item]
    assert raised.value.field == "enabled"
    with pytest.raises(WorkhorseValidationError) as raised:
        await admin.run_retention(budget=0)
    assert raised.value.field == "budget"


def test_a_worker_registers_its_handlers_retry_policies(pool: ConnectionPool[Any]) -> None:
    worker = Worker(Queue(pool), queues=["reg-a", "reg-b"], poll_ms=50)
    worker.handle("with.policy", lambda payload, ctx: None, retry={"kind": "fixed", "delayMs": 5})
    worker.handle("without", lambda payload, ctx: None)
    worker.start()
    try:

        def rows() -> list[tuple[Any, ...]]:
            with pool.connection() as conn:
                sql = "SELECT queue, type, retry_policy->>'kind', worker_id FROM workhorse.handler_policy ORDER BY queue, type"
                return list(conn.execute(sql).fetchall())

        found = wait_for(rows, 20, "the registration")
    finally:
        worker.stop()
    assert found == [
        ("reg-a", "with.policy", "fixed", worker.worker_id),
        ("reg-a", "without", None, worker.worker_id),
        ("reg-b", "with.policy", "fixed", worker.worker_id),
        ("reg-b", "without", None, worker.worker_id),
    ]


def test_the_dashboards_incident_reads(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    tagged = queue.enqueue("t", {"orderId": 42}, tags=["vip"], max_attempts=1)
    queue.enqueue("t", {"orderId": 7}, max_attempts=1)
    assert [j.id for j in admin.find_jobs(payload={"orderId": 42}).items] == [tagged]
    assert [j.id for j in admin.find_jobs(tag="vip").items] == [tagged]
    with pytest.raises(WorkhorseValidationError):
        admin.find_jobs()  # no criterion: find_jobs_v1 refuses it
    worker = Worker(queue, poll_ms=50)

    def fails(payload: Any, ctx: HandlerContext) -> None:
        raise ValueError("card declined")

    worker.handle("t", fails)
    since = datetime.now(timezone.utc) - timedelta(minutes=1)
    with worker:
        wait_for(lambda: len(admin.list_dead_letters().items) == 2, 20, "both jobs to fail")
    durations = admin.job_durations([tagged])
    assert durations[tagged].run_ms is not None and durations[tagged].started_at is not None
    [group] = admin.error_groups(since=since)
    assert (group.name, group.message, group.failures, group.queues) == ("ValueError", "card declined", 2, ["default"])
    timings = admin.job_timings(since=since)
    assert [t.name for t in timings] == ["default"] and timings[0].attempts >= 1
