"""Issue 30, items 6 and 10, for the Python SDK: what the SDK hands a handler (a human decision,
a signal's payload, child outcomes, dependencies) can be returned and checkpointed as it is, and
the handler calls refuse names they do not know before anything is written (keyword-only
parameters with Python's ``TypeError``, dicts with ``WorkhorseValidationError``)."""

from __future__ import annotations

import re
from typing import Any

from psycopg_pool import ConnectionPool

from workhorse import Admin, HandlerContext, Queue, Worker, WorkhorseValidationError

from .support import wait_for


def _state(admin: Admin, job_id: str) -> str | None:
    job = admin.get_job(job_id)
    return None if job is None else job.state


def test_what_a_handler_is_given_can_be_returned_and_checkpointed_as_it_is(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    worker = Worker(queue, poll_ms=50, tick_ms=50)
    worker.handle("first", lambda payload, ctx: {"first": True})

    def child(payload: Any, ctx: HandlerContext) -> Any:
        if payload < 0:
            raise ValueError("negative")
        return payload * 2

    worker.handle("child", child)

    @worker.handler("all")
    def handler(payload: Any, ctx: HandlerContext) -> Any:
        dependencies = ctx.dependencies()
        children = ctx.run_children("kids", [{"type": "child", "payload": 1}, {"type": "child", "payload": -1, "max_attempts": 1}])
        signal = ctx.wait_for_signal("go")
        decision = ctx.wait_for_human("approve", choices=["yes", "no"])
        again = ctx.checkpoint("decision", lambda: decision)
        return {"dependencies": dependencies, "children": children, "signal": signal, "decision": decision, "again": again}

    first = queue.enqueue("first", None)
    job_id = queue.enqueue("all", None, depends_on=[first])
    worker.start()
    try:
        assert queue.send_signal(job_id, "go", {"at": "now"}) in ("delivered", "buffered")
        wait_for(lambda: len(admin.list_human_waits(job_id=job_id).items) == 1, 30, "the human wait")
        assert queue.complete_human_wait(job_id, "approve", "yes", actor="alice") == "completed"
        wait_for(lambda: _state(admin, job_id) == "succeeded", 30, "the job to succeed")
    finally:
        worker.stop()
    job = admin.get_job(job_id)
    assert job is not None
    result: Any = job.result
    assert result["dependencies"] == [{"jobId": first, "state": "succeeded", "result": {"first": True}, "error": None}]
    assert [(c["state"], c["result"]) for c in result["children"]] == [("succeeded", 2), ("failed", None)]
    assert result["children"][1]["error"]["message"] == "negative"
    assert result["signal"] == {"at": "now"}
    decided = result["decision"]
    assert {k: decided[k] for k in ("decision", "actor", "reason")} == {"decision": "yes", "actor": "alice", "reason": None}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", decided["decidedAt"])
    assert result["again"] == decided


def test_handler_calls_refuse_unknown_names_before_anything_is_written(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    worker = Worker(queue, poll_ms=50, tick_ms=50)
    calls: list[Any] = [
        lambda ctx: ctx.wait_for_signal("s", timeout=1000),
        lambda ctx: ctx.wait_for_human("h", timeout=1000),
        lambda ctx: ctx.run_child("k", "t", {}, bogus=1),
        lambda ctx: ctx.run_child("k", "t", {}, depends_on=[ctx.job_id]),
        lambda ctx: ctx.run_children("k", [{"type": "t", "payload": {}, "bogus": 1}]),
        lambda ctx: ctx.run_children("k", [{"type": "t", "payload": {}}, {"type": "t", "payload": {}, "depends_on": [0]}]),
    ]

    @worker.handler("probe")
    def probe(payload: Any, ctx: HandlerContext) -> Any:
        seen = []
        for call in calls:
            try:
                call(ctx)
                seen.append("accepted")
            except WorkhorseValidationError as error:
                seen.append(error.field)
            except TypeError as error:
                seen.append("TypeError" if "unexpected keyword argument" in str(error) else str(error))
        return seen

    job_id = queue.enqueue("probe", None)
    worker.start()
    try:
        wait_for(lambda: _state(admin, job_id) == "succeeded", 30, "the probe")
    finally:
        worker.stop()
    job = admin.get_job(job_id)
    assert job is not None and job.result == ["TypeError", "TypeError", "bogus", "dependsOn", "children[0].bogus", "children[1].dependsOn"]
    assert job.children == [] and admin.list_human_waits(job_id=job_id).items == []
