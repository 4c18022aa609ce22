"""Queue: validation before anything is written, the caller's transaction, every driver."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import SCHEMA_VERSION, Admin, IdempotencyConflictError, Queue, SchemaVersionMismatchError, WorkhorseValidationError
from workhorse.aio import AsyncAdmin, AsyncQueue


def count_jobs(pool: ConnectionPool[Any]) -> int:
    return len(Admin(pool).list_jobs(limit=1000).items)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (float("nan"), "payload"),
        ({"at": datetime.now(timezone.utc)}, "payload.at"),
        ({"a": [1, {"b": "x\x00y"}]}, "payload.a[1].b"),
        ({1: "int key"}, "payload key 1"),
        ({"s": "\ud800"}, "payload.s"),
        ({"set": {1, 2}}, "payload.set"),
        ("x" * (1024 * 1024), "payload"),
    ],
)
def test_a_payload_that_is_not_storable_json_is_refused_naming_the_field(
    pool: ConnectionPool[Any], payload: Any, field: str
) -> None:
    with pytest.raises(WorkhorseValidationError) as raised:
        Queue(pool).enqueue("t", payload)
    assert raised.value.field == field
    assert count_jobs(pool) == 0


def test_a_cycle_is_refused(pool: ConnectionPool[Any]) -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(WorkhorseValidationError, match="cycle"):
        Queue(pool).enqueue("t", cyclic)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"run_at": datetime.now()}, "runAt"),
        ({"idempotency_scope": "s"}, "idempotencyScope"),
        ({"retry_policy": {"kind": "fixed", "delayMs": -1}}, "retryPolicy.delayMs"),
        ({"retry_policy": {"kind": "exponential", "initialMs": 5000, "maxMs": 10}}, "retryPolicy.maxMs"),
        ({"priority": True}, "priority"),
        ({"tags": "one"}, "tags"),
        ({"idempotency_key": ""}, "idempotencyKey"),
    ],
)
def test_bad_options_are_refused_naming_the_wire_field(pool: ConnectionPool[Any], options: dict[str, Any], field: str) -> None:
    with pytest.raises(WorkhorseValidationError) as raised:
        Queue(pool).enqueue("t", {}, **options)
    assert raised.value.field == field


def test_an_unknown_option_is_refused(pool: ConnectionPool[Any]) -> None:
    with pytest.raises(WorkhorseValidationError) as raised:
        Queue(pool).enqueue_many([{"type": "t", "payload": 1, "prio": 3}])  # type: ignore[typeddict-unknown-key]
    assert raised.value.field == "requests[0].prio"


def test_a_batch_over_1000_is_refused(pool: ConnectionPool[Any]) -> None:
    with pytest.raises(WorkhorseValidationError, match="at most 1000"):
        Queue(pool).enqueue_many([{"type": "t", "payload": i} for i in range(1001)])


def test_the_job_commits_and_rolls_back_with_the_callers_transaction(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    with pool.connection() as conn:
        with conn.transaction():
            kept = queue.enqueue("t", {"kept": True}, conn=conn)
        with pytest.raises(RuntimeError), conn.transaction():
            queue.enqueue("t", {"kept": False}, conn=conn)
            raise RuntimeError("the business write failed")
    assert [j.id for j in Admin(pool).list_jobs().items] == [kept]


def test_enqueue_many_returns_ids_in_input_order_with_every_option(pool: ConnectionPool[Any]) -> None:
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    ids = Queue(pool).enqueue_many([
        {"type": "a", "payload": 1, "priority": 9, "tags": ["x"]},
        {"type": "b", "payload": 2, "run_at": later, "queue": "other", "max_attempts": 2},
    ])  # fmt: skip
    admin = Admin(pool)
    first, second = admin.get_job(ids[0]), admin.get_job(ids[1])
    assert first is not None and (first.type, first.priority, first.tags, first.state) == ("a", 9, ["x"], "ready")
    assert second is not None and (second.queue, second.max_attempts, second.state) == ("other", 2, "scheduled")
    assert abs((second.run_at - later).total_seconds()) < 0.001
    assert Queue(pool).enqueue_many([]) == []


def test_an_idempotency_conflict_names_the_existing_job_and_the_fields(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    first = queue.enqueue("t", {"v": 1}, idempotency_key="k", priority=1)
    assert queue.enqueue("t", {"v": 1}, idempotency_key="k", priority=1) == first
    with pytest.raises(IdempotencyConflictError) as raised:
        queue.enqueue("t", {"v": 2}, idempotency_key="k", priority=2)
    assert raised.value.existing_job_id == first
    assert raised.value.fields == ["payload", "priority"]


def test_a_schema_version_this_sdk_does_not_know_is_refused_with_a_clear_message(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE workhorse.schema_version SET version = 99")
        # A newer schema that no longer serves this release (one that does is used as it is).
        conn.execute("CREATE OR REPLACE FUNCTION workhorse.oldest_client_v1() RETURNS integer LANGUAGE plpgsql AS $$ BEGIN RETURN 99; END $$")
    with ConnectionPool(db_url, min_size=1, max_size=2) as pool:
        with pytest.raises(
            SchemaVersionMismatchError,
            match=rf"version 99, newer than this package \(version {SCHEMA_VERSION}\), and it no longer serves this release: upgrade the package",
        ):
            Queue(pool).enqueue("t", {})


async def test_async_psycopg_enqueue_joins_the_callers_transaction(apool: AsyncConnectionPool[Any]) -> None:
    queue = AsyncQueue(apool)
    async with apool.connection() as conn:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await queue.enqueue("t", {}, conn=conn)
                raise RuntimeError("rolled back")
        async with conn.transaction():
            kept = await queue.enqueue("t", {"n": 1}, conn=conn, tags=["a"])
    page = await AsyncAdmin(apool).list_jobs()
    assert [j.id for j in page.items] == [kept]


async def test_asyncpg_enqueue_joins_the_callers_transaction_and_maps_errors(asyncpg_pool: Any) -> None:
    queue = AsyncQueue(asyncpg_pool)
    async with asyncpg_pool.acquire() as conn:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await queue.enqueue("t", {}, conn=conn)
                raise RuntimeError("rolled back")
        async with conn.transaction():
            kept = await queue.enqueue("t", {"n": 1}, conn=conn, idempotency_key="once")
    with pytest.raises(IdempotencyConflictError):
        await queue.enqueue("t", {"n": 2}, idempotency_key="once")
    job = await AsyncAdmin(asyncpg_pool).get_job(kept)
    assert job is not None and job.payload == {"n": 1} and job.state == "ready"
