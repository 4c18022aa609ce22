"""limits.json (package data) is the repository's sdk/protocol/limits.json, and this SDK reads its
values from it: the worker's defaults and bounds, and the heartbeat-below-lease rule every SDK
applies with the same field and message (issue 31, item 2)."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from workhorse import Admin, HandlerContext, IsolationError, Queue, Worker, WorkhorseValidationError
from workhorse._limits import LIMITS, WORKER, heartbeat_not_below_lease
from workhorse._worker_options import engine_options
from workhorse.errors import from_db_error
from workhorse.validation import BATCH_SIZE, DELAY_MS, JSON_BYTES, NAME_LENGTH

from .support import wait_for

SOURCE = Path(__file__).resolve().parents[2] / "protocol" / "limits.json"


def test_the_shipped_file_is_the_protocol_file_and_is_read_whole() -> None:
    shipped = files("workhorse").joinpath("limits.json").read_text("utf-8")
    assert shipped == SOURCE.read_text("utf-8"), "run node scripts/copy-sdk-sql.js"
    assert LIMITS == json.loads(SOURCE.read_text("utf-8"))
    enqueue = LIMITS["enqueue"]
    assert (NAME_LENGTH, BATCH_SIZE, JSON_BYTES, DELAY_MS) == (
        enqueue["nameLength"]["max"],
        enqueue["batchSize"]["max"],
        enqueue["jsonBytes"]["max"],
        LIMITS["retryPolicy"]["delayMs"]["max"],
    )


def test_worker_defaults_are_those_of_limits_json() -> None:
    o = engine_options({})
    assert (o.queues, o.concurrency, o.lease_ms, o.poll_ms, o.tick_ms, o.shutdown_timeout_ms, o.unknown_type_delay_ms) == (
        WORKER["queues"]["default"],
        WORKER["concurrency"]["default"],
        WORKER["leaseMs"]["default"],
        WORKER["pollMs"]["default"],
        WORKER["tickMs"]["default"],
        WORKER["shutdownTimeoutMs"]["default"],
        WORKER["unknownTypeDelayMs"]["default"],
    )
    assert o.heartbeat_ms == o.lease_ms // WORKER["heartbeatMs"]["defaultLeaseDivisor"]


@pytest.mark.parametrize("heartbeat_ms", [3000, 5000])
def test_a_heartbeat_at_or_above_the_lease_is_refused(heartbeat_ms: int) -> None:
    with pytest.raises(WorkhorseValidationError) as refused:
        engine_options({"lease_ms": 3000, "heartbeat_ms": heartbeat_ms})
    assert (refused.value.field, refused.value.reason) == ("heartbeatMs", heartbeat_not_below_lease(3000))
    assert engine_options({"lease_ms": 3000, "heartbeat_ms": 2999}).heartbeat_ms == 2999


def test_a_claim_above_read_committed_is_the_typed_isolation_error(pool: ConnectionPool[Any]) -> None:
    """SQLSTATE P1004 maps to IsolationError, as in TypeScript and Go (docs/protocol.md, Errors)."""
    with pool.connection() as conn:
        with pytest.raises(psycopg.Error) as raised:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                conn.execute(
                    "SELECT * FROM workhorse.complete_and_claim_v1(%s, %s::jsonb, %s::text[], %s, %s)",
                    ("iso-worker", "[]", ["iso"], 1, 60_000),
                )
    assert isinstance(from_db_error(raised.value), IsolationError)


def test_a_handlers_sleep_and_wait_timeouts_past_the_bounds_are_refused_by_the_sql(pool: ConnectionPool[Any]) -> None:
    """The client checks a whole number only; the SQL refuses one past limits.json's bounds,
    naming the field, and nothing is written (the job goes on)."""
    handler = LIMITS["handler"]
    queue, admin = Queue(pool), Admin(pool)
    worker = Worker(queue, queues=["limits-handler"], poll_ms=50, tick_ms=50)
    calls: list[Any] = [
        lambda ctx: ctx.sleep("too-long", handler["sleepMs"]["max"] + 1),
        lambda ctx: ctx.sleep("too-short", handler["sleepMs"]["min"] - 1),
        lambda ctx: ctx.wait_for_signal("signal", timeout_ms=handler["waitTimeoutMs"]["max"] + 1),
        lambda ctx: ctx.wait_for_human("human", timeout_ms=handler["waitTimeoutMs"]["min"] - 1),
        lambda ctx: ctx.sleep("fraction", 1.5),
    ]

    @worker.handler("limits.handler")
    def probe(payload: Any, ctx: HandlerContext) -> Any:
        seen = []
        for call in calls:
            try:
                call(ctx)
                seen.append("accepted")
            except WorkhorseValidationError as error:
                seen.append(error.field)
        return seen

    job_id = queue.enqueue("limits.handler", None, queue="limits-handler")
    worker.start()
    try:
        wait_for(lambda: (job := admin.get_job(job_id)) is not None and job.state == "succeeded", 30, "the probe")
    finally:
        worker.stop()
    job = admin.get_job(job_id)
    assert job is not None and job.result == ["ms", "ms", "timeoutMs", "timeoutMs", "ms"]
    assert admin.list_human_waits(job_id=job_id).items == []


def test_the_date_range_and_handler_name_length_are_those_of_limits_json() -> None:
    from datetime import datetime, timezone

    from workhorse._limits import DATES, HANDLER
    from workhorse.context import _check_checkpoint_name
    from workhorse.validation import check_datetime

    low, high = DATES["minYear"], DATES["maxYear"]
    check_datetime(datetime(low, 1, 1, tzinfo=timezone.utc), "at")
    check_datetime(datetime(high, 12, 31, tzinfo=timezone.utc), "at")
    with pytest.raises(WorkhorseValidationError) as refused:
        check_datetime(datetime(low - 1, 12, 31, tzinfo=timezone.utc), "at")
    assert (refused.value.field, refused.value.reason) == ("at", f"must be a time between the years {low} and {high}")
    name = HANDLER["nameLength"]
    assert _check_checkpoint_name("n" * name["max"]) == "n" * name["max"]
    for bad in ("n" * (name["max"] + 1), "n" * (name["min"] - 1)):
        with pytest.raises(WorkhorseValidationError):
            _check_checkpoint_name(bad)
