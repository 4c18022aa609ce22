"""Typed jobs (``JobDefinition[P, R]``): mypy --strict rejects a wrong payload or a handler of
the wrong signature; the validator (a pydantic model or a callable) refuses a bad payload at
enqueue before anything is written; a payload that does not decode on the worker fails the job
at once, without retries, with the details."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypedDict

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from pydantic import BaseModel

from workhorse import Admin, HandlerContext, JobDefinition, Queue, Worker, WorkhorseValidationError
from workhorse.aio import AsyncAdmin, AsyncHandlerContext, AsyncQueue, AsyncWorker

from .support import wait_for

HERE = Path(__file__).parent


class Address(BaseModel):
    to: str
    retries: int = 0


SEND = JobDefinition[Address, dict[str, str]]("email.send", queue="mail", options={"priority": 5}, validator=Address)


class Order(TypedDict):
    orderId: int


def order_of(value: Any) -> Order:
    if not isinstance(value, dict) or not isinstance(value.get("orderId"), int):
        raise ValueError("orderId must be an integer")
    return {"orderId": value["orderId"]}


FULFILL = JobDefinition[Order, int]("order.fulfill", validator=order_of)


def _jobs(pool: ConnectionPool[Any]) -> int:
    with pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM workhorse.job").fetchone()
    assert row is not None
    return int(row[0])


def test_mypy_rejects_wrong_payloads_and_handlers_and_accepts_right_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mypy import api

    monkeypatch.setenv("MYPYPATH", str(HERE.parent / "src"))
    ok, wrong = HERE / "typing" / "typed_jobs_ok.py", HERE / "typing" / "typed_jobs_wrong.py"
    out, err, _ = api.run(["--strict", "--python-version", "3.11", "--cache-dir", str(tmp_path), "--no-error-summary", str(ok), str(wrong)])
    assert err == ""
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert [e for e in errors if "typed_jobs_ok.py" in e] == []
    lines = wrong.read_text().splitlines()
    marked = {i + 1 for i, line in enumerate(lines) if line.endswith("# wrong")}
    reported = {int(m.group(1)) for e in errors if (m := re.search(r"typed_jobs_wrong\.py:(\d+):", e))}
    assert reported == marked, out


def test_a_pydantic_payload_is_validated_and_stored_as_json_with_the_definitions_options(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    job_id = queue.enqueue(SEND, Address(to="a@example.com"))
    job = queue.get_job(job_id, SEND)
    assert job is not None and job.payload == Address(to="a@example.com", retries=0)
    assert (job.snapshot.queue, job.snapshot.priority, job.snapshot.payload) == ("mail", 5, {"to": "a@example.com", "retries": 0})
    # A dict passes through the model too; the call's own options win over the definition's.
    other = queue.enqueue(SEND, {"to": "b@example.com"}, queue="urgent")  # type: ignore[misc]
    snapshot = queue.get_job(other)
    assert snapshot is not None and snapshot.queue == "urgent" and snapshot.payload == {"to": "b@example.com", "retries": 0}


def test_a_payload_the_validator_refuses_is_not_written(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    before = _jobs(pool)
    with pytest.raises(WorkhorseValidationError) as raised:
        queue.enqueue(SEND, {"to": ["not", "a", "string"]})  # type: ignore[misc]
    assert raised.value.field == "payload" and "Address" in str(raised.value)
    with pytest.raises(WorkhorseValidationError) as raised:
        queue.enqueue(FULFILL, {"orderId": "42"})  # type: ignore[misc]
    assert raised.value.field == "payload" and "orderId must be an integer" in str(raised.value)
    assert _jobs(pool) == before


def test_a_payload_that_does_not_decode_fails_the_job_at_once_with_the_details(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    # Enqueued by type name, past the validator (another producer, an older version of the type).
    bad = queue.enqueue("order.fulfill", {"orderId": "not a number"})
    good = queue.enqueue(FULFILL, Order(orderId=7))
    worker = Worker(queue, poll_ms=50)
    seen: list[Order] = []

    @worker.job(FULFILL)
    def fulfill(payload: Order, ctx: HandlerContext) -> int:
        seen.append(payload)
        return payload["orderId"] * 2

    worker.start()
    try:
        wait_for(lambda: all((j := admin.get_job(i)) is not None and j.finished_at for i in (bad, good)), 20, "both jobs to end")
    finally:
        worker.stop()
    failed = admin.get_job(bad)
    assert failed is not None and (failed.state, failed.current_attempt, failed.max_attempts) == ("failed", 1, 25)
    assert failed.error is not None and failed.error["name"] == "PayloadDecodeError"
    assert "orderId must be an integer" in str(failed.error["message"])
    succeeded = admin.get_job(good)
    assert succeeded is not None and (succeeded.state, succeeded.result) == ("succeeded", 14)
    assert seen == [{"orderId": 7}]


async def test_an_async_worker_decodes_a_pydantic_payload(apool: AsyncConnectionPool[Any]) -> None:
    queue, admin = AsyncQueue(apool), AsyncAdmin(apool)
    ok = await queue.enqueue(SEND, Address(to="c@example.com", retries=2))
    bad = await queue.enqueue("email.send", {"to": 3}, queue="mail")
    worker = AsyncWorker(queue, queues=["mail"], poll_ms=50)

    async def send(payload: Address, ctx: AsyncHandlerContext) -> dict[str, str]:
        assert isinstance(payload, Address)
        return {"to": payload.to}

    worker.handle(SEND, send)
    import asyncio

    task = asyncio.create_task(worker.run())
    try:
        for _ in range(1000):
            jobs = [await admin.get_job(i) for i in (ok, bad)]
            if all(j is not None and j.finished_at for j in jobs):
                break
            await asyncio.sleep(0.02)
    finally:
        await worker.stop()
        await task
    typed = await queue.get_job(ok, SEND)
    assert typed is not None and typed.result == {"to": "c@example.com"} and typed.payload.retries == 2
    failed = await admin.get_job(bad)
    assert failed is not None and failed.state == "failed" and failed.current_attempt == 1
    assert failed.error is not None and failed.error["name"] == "PayloadDecodeError"


def test_a_definition_is_checked_when_it_is_made() -> None:
    with pytest.raises(WorkhorseValidationError) as raised:
        JobDefinition[Order, None]("")
    assert raised.value.field == "type"
    with pytest.raises(WorkhorseValidationError) as raised:
        JobDefinition[Order, None]("t", validator=42)  # type: ignore[arg-type]
    assert raised.value.field == "validator"


def test_a_batch_of_typed_requests_is_validated_before_anything_is_written(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    before = _jobs(pool)
    with pytest.raises(WorkhorseValidationError) as raised:
        queue.enqueue_many([FULFILL.request(Order(orderId=1)), FULFILL.request({"orderId": "x"})])  # type: ignore[typeddict-item]
    assert raised.value.field == "payload" and _jobs(pool) == before
    ids = queue.enqueue_many([SEND.request(Address(to="a@example.com")), FULFILL.request(Order(orderId=1), priority=3)])
    sent = admin.get_job(ids[0], SEND)
    assert sent is not None and sent.payload == Address(to="a@example.com") and sent.snapshot.queue == "mail"
    assert sent.snapshot.priority == 5
    order = admin.get_job(ids[1], FULFILL)
    assert order is not None and order.payload == {"orderId": 1} and order.snapshot.priority == 3
    with pytest.raises(WorkhorseValidationError) as wrong_type:
        admin.get_job(ids[1], SEND)
    assert wrong_type.value.field == "jobId"
