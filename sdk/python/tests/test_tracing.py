"""Tracing with OpenTelemetry (docs/operations.md#tracing): the PRODUCER span of an enqueue and
the trace context its jobs store, the CONSUMER span of each attempt (its own trace, linked to
that context), outcomes and errors, child jobs, and contexts written by another client.

The process's tracer provider is set once (OpenTelemetry allows no second one): an SDK with an
in-memory exporter. Without OpenTelemetry, or without an SDK, see test_without_an_sdk_*."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import Admin, HandlerContext, Queue, UnknownDependencyError, Worker
from workhorse.aio import AsyncAdmin, AsyncHandlerContext, AsyncQueue, AsyncWorker

from .support import SRC, wait_for

_EXPORTER = InMemorySpanExporter()
# What the TypeScript client reads from the column (lib/core/telemetry/trace-context.ts).
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _stored(url: str, job_id: str) -> Any:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT trace_context FROM workhorse.job WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row[0]


def _traceparent(span: ReadableSpan) -> str:
    context = span.get_span_context()
    assert context is not None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def _ids(context: Any) -> tuple[int, int]:
    return context.trace_id, context.span_id


def _state(admin: Admin, job_id: str) -> str | None:
    job = admin.get_job(job_id)
    return None if job is None else job.state


def _run_until(worker: Worker, admin: Admin, job_id: str, state: str) -> None:
    """Runs ``worker`` until the job is in ``state``; once stopped, its attempts' spans have ended."""
    worker.start()
    try:
        wait_for(lambda: _state(admin, job_id) == state, 30, f"the job to be {state}")
    finally:
        worker.stop()


def test_an_enqueue_under_a_span_records_a_producer_span_whose_context_the_job_stores(
    pool: ConnectionPool[Any], db_url: str, spans: InMemorySpanExporter
) -> None:
    queue = Queue(pool)
    with trace.get_tracer("shop").start_as_current_span("checkout") as checkout:
        job_id = queue.enqueue("email.send", {"to": "a@example.com"}, queue="mail")
    (send,) = _named(spans, "send mail")
    assert send.kind == SpanKind.PRODUCER
    # One instrumentation scope name in every language (TypeScript and Go use it too).
    assert send.instrumentation_scope is not None and send.instrumentation_scope.name == "nestjs-workhorse"
    assert send.parent is not None and send.parent.span_id == checkout.get_span_context().span_id
    assert send.context is not None and send.context.trace_id == checkout.get_span_context().trace_id
    assert dict(send.attributes or {}) == {
        "messaging.system": "workhorse",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": "mail",
        "messaging.message.id": job_id,
        "workhorse.job.type": "email.send",
    }
    # The row as the TypeScript worker reads it: the W3C traceparent of the send span.
    stored = _stored(db_url, job_id)
    assert stored == {"traceparent": _traceparent(send)}
    assert _TRACEPARENT.fullmatch(stored["traceparent"])


async def test_a_batch_shares_one_span_and_its_context(
    apool: AsyncConnectionPool[Any], db_url: str, spans: InMemorySpanExporter
) -> None:
    queue = AsyncQueue(apool)
    with trace.get_tracer("shop").start_as_current_span("import"):
        ids = await queue.enqueue_many([
            {"type": "row.import", "payload": 1, "queue": "a"},
            {"type": "row.import", "payload": 2, "queue": "b"},
        ])  # fmt: skip
    (send,) = _named(spans, "send")  # two queues: no destination in the name
    attributes = dict(send.attributes or {})
    assert attributes["messaging.batch.message_count"] == 2
    assert attributes["workhorse.job.type"] == "row.import"
    assert "messaging.destination.name" not in attributes and "messaging.message.id" not in attributes
    assert [_stored(db_url, i) for i in ids] == [{"traceparent": _traceparent(send)}] * 2


@pytest.mark.parametrize("client", ["sync", "async"])
async def test_a_refused_enqueue_ends_its_send_span_as_an_error(
    client: str, pool: ConnectionPool[Any], apool: AsyncConnectionPool[Any], spans: InMemorySpanExporter
) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    with trace.get_tracer("shop").start_as_current_span("checkout"):
        with pytest.raises(UnknownDependencyError):
            if client == "sync":
                Queue(pool).enqueue("invoice", {}, depends_on=[missing])
            else:
                await AsyncQueue(apool).enqueue("invoice", {}, depends_on=[missing])
    (send,) = _named(spans, "send default")
    assert send.end_time is not None
    assert send.status.status_code == StatusCode.ERROR
    assert dict(send.attributes or {})["error.type"] == "UnknownDependencyError"
    assert "messaging.message.id" not in dict(send.attributes or {})


async def test_asyncpg_enqueues_carry_the_context_too(asyncpg_pool: Any, db_url: str, spans: InMemorySpanExporter) -> None:
    queue = AsyncQueue(asyncpg_pool)
    with trace.get_tracer("shop").start_as_current_span("signup"):
        job_id = await queue.enqueue("welcome", {})
    (send,) = _named(spans, "send default")
    assert _stored(db_url, job_id) == {"traceparent": _traceparent(send)}


def test_without_an_active_span_nothing_is_stored_and_the_attempt_has_no_link(
    pool: ConnectionPool[Any], db_url: str, spans: InMemorySpanExporter
) -> None:
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("t", {})
    assert spans.get_finished_spans() == ()
    assert _stored(db_url, job_id) is None
    worker = Worker(queue, poll_ms=50)
    worker.handle("t", lambda payload, ctx: None)
    _run_until(worker, admin, job_id, "succeeded")
    (process,) = _named(spans, "process default")
    assert process.links == () and process.parent is None


async def test_an_attempt_runs_in_a_consumer_span_of_its_own_trace_linked_to_the_enqueue(
    apool: AsyncConnectionPool[Any], spans: InMemorySpanExporter
) -> None:
    queue, admin = AsyncQueue(apool), AsyncAdmin(apool)
    with trace.get_tracer("shop").start_as_current_span("checkout"):
        job_id = await queue.enqueue("order.fulfill", {"n": 1}, queue="orders")
    (send,) = _named(spans, "send orders")
    worker = AsyncWorker(queue, queues=["orders"], poll_ms=50)

    async def fulfill(payload: Any, ctx: AsyncHandlerContext) -> str:
        with trace.get_tracer("shop").start_as_current_span("charge"):
            return "done"

    worker.handle("order.fulfill", fulfill)
    running = asyncio.create_task(worker.run())
    try:
        await worker.started()
        for _ in range(500):
            if _named(spans, "process orders"):
                break
            await asyncio.sleep(0.02)
    finally:
        await worker.stop()
        await running
    (process,) = _named(spans, "process orders")
    (charge,) = _named(spans, "charge")
    assert process.kind == SpanKind.CONSUMER and process.parent is None
    assert process.context is not None and send.context is not None
    assert process.context.trace_id != send.context.trace_id
    assert [_ids(link.context) for link in process.links] == [_ids(send.context)]
    assert dict(process.attributes or {}) == {
        "messaging.system": "workhorse",
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": "orders",
        "messaging.message.id": job_id,
        "workhorse.job.type": "order.fulfill",
        "workhorse.job.attempt": 1,
        "workhorse.job.outcome": "succeeded",
    }
    assert process.status.status_code == StatusCode.UNSET
    # The handler's own spans belong to the attempt's trace.
    assert charge.parent is not None and charge.parent.span_id == process.context.span_id
    job = await admin.get_job(job_id)
    assert job is not None and job.state == "succeeded"


def test_a_failed_attempt_records_the_error_and_its_outcome(pool: ConnectionPool[Any], spans: InMemorySpanExporter) -> None:
    queue, admin = Queue(pool), Admin(pool)
    with trace.get_tracer("shop").start_as_current_span("checkout"):
        job_id = queue.enqueue("flaky", {}, max_attempts=2, retry_policy={"kind": "fixed", "delayMs": 0})
    worker = Worker(queue, poll_ms=50, tick_ms=50)

    def flaky(payload: Any, ctx: HandlerContext) -> None:
        raise ValueError(f"boom {ctx.attempt}")

    worker.handle("flaky", flaky)
    _run_until(worker, admin, job_id, "failed")
    first, second = _named(spans, "process default")
    assert [s.attributes["workhorse.job.attempt"] for s in (first, second)] == [1, 2]  # type: ignore[index]
    assert first.attributes["workhorse.job.outcome"] == "retry_scheduled"  # type: ignore[index]
    assert second.attributes["workhorse.job.outcome"] == "failed"  # type: ignore[index]
    for attempt, span in ((1, first), (2, second)):
        assert span.status.status_code == StatusCode.ERROR and span.status.description == f"boom {attempt}"
        assert span.attributes["error.type"] == "ValueError"  # type: ignore[index]
        assert [e.name for e in span.events] == ["exception"]
    # One trace per attempt, both linked to the enqueue.
    assert first.links[0].context == second.links[0].context


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_an_exception_whose_str_and_repr_raise_still_has_its_failure_recorded(
    pool: ConnectionPool[Any], spans: InMemorySpanExporter
) -> None:
    queue, admin = Queue(pool), Admin(pool)
    with trace.get_tracer("shop").start_as_current_span("checkout"):
        job_id = queue.enqueue("odd", {}, max_attempts=1)
    worker = Worker(queue, poll_ms=50, lease_ms=60_000)

    def odd(payload: Any, ctx: HandlerContext) -> None:
        raise Unprintable()

    worker.handle("odd", odd)
    # Recorded by the worker itself, not left to lease expiry (a minute, past the test's wait).
    _run_until(worker, admin, job_id, "failed")
    (process,) = _named(spans, "process default")
    job = admin.get_job(job_id)
    assert job is not None and job.error is not None
    assert job.error["name"] == "Unprintable" and job.error["message"] == ""
    assert process.status.status_code == StatusCode.ERROR
    assert process.attributes["workhorse.job.outcome"] == "failed"  # type: ignore[index]


def test_a_child_job_carries_the_context_of_its_parents_attempt(pool: ConnectionPool[Any], db_url: str, spans: InMemorySpanExporter) -> None:
    queue, admin = Queue(pool), Admin(pool)
    with trace.get_tracer("shop").start_as_current_span("checkout"):
        parent_id = queue.enqueue("parent", {})
    worker = Worker(queue, queues=["default", "children"], poll_ms=50, tick_ms=50)

    def parent(payload: Any, ctx: HandlerContext) -> Any:
        return ctx.run_child("c", "child", {}, queue="children")

    worker.handle("parent", parent)
    worker.handle("child", lambda payload, ctx: 7)
    _run_until(worker, admin, parent_id, "succeeded")
    details = admin.get_job(parent_id)
    assert details is not None and details.result == 7, details
    child_id = details.children[0].id
    parked, resumed = _named(spans, "process default")
    assert parked.attributes["workhorse.job.outcome"] == "parked"  # type: ignore[index]
    assert resumed.attributes["workhorse.job.outcome"] == "succeeded"  # type: ignore[index]
    # Each attempt's run_child is a send span of that attempt (the replay's finds the same child).
    sends = _named(spans, "send children")
    assert parked.context is not None and resumed.context is not None
    assert sorted(s.parent.span_id for s in sends if s.parent) == sorted([parked.context.span_id, resumed.context.span_id])
    (send_child,) = [s for s in sends if s.parent and s.parent.span_id == parked.context.span_id]
    assert _stored(db_url, child_id) == {"traceparent": _traceparent(send_child)}
    (child_process,) = _named(spans, "process children")
    assert [_ids(link.context) for link in child_process.links] == [_ids(send_child.context)]


def test_a_context_another_client_stored_is_linked_with_its_tracestate(
    pool: ConnectionPool[Any], spans: InMemorySpanExporter
) -> None:
    # No test bed runs the TypeScript client from here: the job is enqueued through the protocol
    # with the `traceContext` the TypeScript client sends (docs/protocol.md, enqueue_many_v1).
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    request = {"type": "t", "payload": {}, "traceContext": {"traceparent": f"00-{trace_id}-{span_id}-01", "tracestate": "vendor=value"}}
    with pool.connection() as conn:
        row = conn.execute("SELECT job_id::text FROM workhorse.enqueue_many_v1(%s::jsonb)", (json.dumps([request]),)).fetchone()
    assert row is not None
    queue, admin = Queue(pool), Admin(pool)
    worker = Worker(queue, poll_ms=50)
    worker.handle("t", lambda payload, ctx: None)
    _run_until(worker, admin, row[0], "succeeded")
    (process,) = _named(spans, "process default")
    (link,) = process.links
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == (trace_id, span_id)
    assert link.context.is_remote and link.context.trace_state.to_header() == "vendor=value"


_WITHOUT_SDK = """
import os, sys
if sys.argv[1] == "uninstalled":
    sys.modules["opentelemetry"] = None  # as if the package were not installed
from psycopg_pool import ConnectionPool
from workhorse import Admin, Queue, Worker, _job_tracing
pool = ConnectionPool(os.environ["DATABASE_URL"], min_size=1, max_size=4)
queue, admin = Queue(pool), Admin(pool)
if sys.argv[1] == "no-sdk":
    from opentelemetry import trace
    with trace.get_tracer("app").start_as_current_span("request"):
        job_id = queue.enqueue("t", {})
else:
    job_id = queue.enqueue("t", {})
worker = Worker(queue, poll_ms=50)
worker.handle("t", lambda payload, ctx: "ran")
worker.start()
import time
deadline = time.monotonic() + 30
while admin.get_job(job_id).state != "succeeded" and time.monotonic() < deadline:
    time.sleep(0.02)
worker.stop()
with pool.connection() as conn:
    stored = conn.execute("SELECT trace_context FROM workhorse.job WHERE id = %s", (job_id,)).fetchone()[0]
# Whether OpenTelemetry's API got loaded: the SDK loads it only once the application has.
loaded = sys.modules.get("opentelemetry.trace") is not None
print(admin.get_job(job_id).state, stored, _job_tracing.active(), loaded)
pool.close()
"""


@pytest.mark.parametrize(
    ("setup", "loaded"),
    [("uninstalled", "False"), ("installed-unused", "False"), ("no-sdk", "True")],
)
def test_without_opentelemetry_or_without_an_sdk_nothing_is_traced_or_stored(setup: str, loaded: str, db_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_SDK, setup],
        env={**os.environ, "DATABASE_URL": db_url, "PYTHONPATH": str(SRC)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["succeeded", "None", "None", loaded]
