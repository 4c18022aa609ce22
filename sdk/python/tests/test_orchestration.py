"""Orchestration beyond the conformance scenarios (014-019): typed refusals and what they carry,
a child key reused for other children, timeouts of human waits, parking errors that a broad
``except Exception`` cannot swallow, signals and decisions inside the caller's transaction, and
the paging of human waits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import (
    Admin,
    ChildJobConflictError,
    DecisionNotAllowedError,
    HandlerContext,
    HumanWaitTimeoutError,
    InvalidCursorError,
    Queue,
    UnknownDependencyError,
    Worker,
    WorkhorseValidationError,
)
from workhorse.aio import AsyncAdmin, AsyncHandlerContext, AsyncQueue, AsyncWorker

from .support import wait_for

MISSING = "00000000-0000-4000-8000-00000000abcd"


def _state(admin: Admin, job_id: str) -> str | None:
    job = admin.get_job(job_id)
    return None if job is None else job.state


def _count(admin: Admin) -> int:
    return len(admin.list_jobs(limit=1000).items)


def test_bad_dependencies_are_refused_naming_the_field_and_nothing_is_written(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    a = queue.enqueue("t", {})
    with pytest.raises(UnknownDependencyError) as unknown:
        queue.enqueue("t", {}, depends_on=[a, MISSING])
    assert unknown.value.field == "dependsOn[1]" and unknown.value.job_id == MISSING
    with pytest.raises(UnknownDependencyError) as in_batch:
        queue.enqueue_many([{"type": "t", "payload": {}}, {"type": "t", "payload": {}, "depends_on": [0, MISSING]}])
    assert in_batch.value.field == "requests[1].dependsOn[1]"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"depends_on": []}, "dependsOn"),
        ({"depends_on": "not-a-list"}, "dependsOn"),
        ({"depends_on": [a, a.upper()]}, "dependsOn[1]"),
        ({"depends_on": [0]}, "dependsOn[0]"),
        ({"depends_on": [True]}, "dependsOn[0]"),
        ({"depends_on": [a], "on_dependency_failed": "ignore"}, "onDependencyFailed"),
        ({"on_dependency_canceled": "run"}, "onDependencyCanceled"),
    ]
    for options, field in cases:
        with pytest.raises(WorkhorseValidationError) as refused:
            queue.enqueue("t", {}, **options)
        assert refused.value.field == field, options
        assert not isinstance(refused.value, UnknownDependencyError)
    with pytest.raises(WorkhorseValidationError) as forward:
        queue.enqueue_many([{"type": "t", "payload": {}, "depends_on": [1]}, {"type": "t", "payload": {}}])
    assert forward.value.field == "requests[0].dependsOn[0]"
    assert _count(admin) == 1


def test_a_child_key_asked_for_other_children_on_replay_is_a_child_job_conflict(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    runs: list[int] = []
    worker = Worker(queue, poll_ms=50, tick_ms=50)
    worker.handle("child", lambda payload, ctx: payload["n"])

    @worker.handler("parent")
    def parent(payload: Any, ctx: HandlerContext) -> Any:
        runs.append(ctx.attempt)
        # Another payload under the same key on the replay: the handler broke its own contract.
        return ctx.run_child("step", "child", {"n": len(runs)})

    job_id = queue.enqueue("parent", {}, max_attempts=1)
    worker.start()
    try:
        wait_for(lambda: _state(admin, job_id) == "failed", 30, "the parent to fail")
    finally:
        worker.stop()
    job = admin.get_job(job_id)
    assert job is not None and job.error is not None
    assert job.error["name"] == "ChildJobConflictError" and '"step" already started other child jobs' in job.error["message"]
    assert runs == [1, 1] and [c.key for c in job.children] == ["step"] and job.children[0].state == "succeeded"
    child = admin.get_job(job.children[0].id)
    assert child is not None and child.parent_id == job_id and child.result == 1


def test_the_conflict_error_carries_the_children_the_key_stands_for(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    seen: list[ChildJobConflictError] = []
    worker = Worker(queue, poll_ms=50, tick_ms=50)
    worker.handle("child", lambda payload, ctx: None)

    @worker.handler("parent")
    def parent(payload: Any, ctx: HandlerContext) -> Any:
        ctx.run_children("all", [{"type": "child", "payload": i} for i in range(2)])
        try:
            ctx.run_children("all", [{"type": "child", "payload": 9}])
        except ChildJobConflictError as error:
            seen.append(error)
        return "ok"

    job_id = queue.enqueue("parent", {})
    worker.start()
    try:
        wait_for(lambda: seen, 30, "the conflict")
    finally:
        worker.stop()
    children = Admin(pool).list_jobs(parent_id=job_id).items
    assert seen[0].field == "key" and sorted(seen[0].child_ids) == sorted(c.id for c in children)


async def test_a_human_wait_times_out_and_a_late_decision_is_timed_out(apool: AsyncConnectionPool[Any]) -> None:
    queue, admin = AsyncQueue(apool), AsyncAdmin(apool)
    worker = AsyncWorker(queue, poll_ms=50, tick_ms=50)

    @worker.handler("review")
    async def review(payload: Any, ctx: AsyncHandlerContext) -> Any:
        try:
            decided = await ctx.wait_for_human("approve", choices=["yes", "no"], timeout_ms=300)
        except HumanWaitTimeoutError as error:
            return {"timedOut": error.wait_name}
        return decided.decision

    job_id = await queue.enqueue("review", {})
    running = asyncio.create_task(worker.run())
    try:
        async def state() -> str | None:
            job = await admin.get_job(job_id)
            return None if job is None else job.state

        for _ in range(600):
            if await state() == "succeeded":
                break
            await asyncio.sleep(0.05)
    finally:
        await worker.stop()
        await running
    job = await admin.get_job(job_id)
    assert job is not None and job.state == "succeeded" and job.result == {"timedOut": "approve"}
    with pytest.raises(DecisionNotAllowedError) as refused:
        await queue.complete_human_wait(job_id, "approve", "maybe", actor="alice")
    assert refused.value.field == "decision" and refused.value.choices == ["yes", "no"]
    assert await queue.complete_human_wait(job_id, "approve", "yes", actor="alice") == "timed_out"


def test_a_broad_except_exception_cannot_swallow_the_park(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    worker = Worker(queue, poll_ms=50, tick_ms=50)

    @worker.handler("ship")
    def ship(payload: Any, ctx: HandlerContext) -> Any:
        try:
            return ctx.wait_for_signal("shipped")
        except Exception:
            return "swallowed"

    job_id = queue.enqueue("ship", {})
    worker.start()
    try:
        wait_for(lambda: _state(admin, job_id) == "blocked", 30, "the job to park")
        # A signal sent in a transaction that rolls back was never sent.
        with pool.connection() as conn:
            with conn.transaction(force_rollback=True):
                assert queue.send_signal(job_id, "shipped", {"id": 1}, conn=conn) == "delivered"
        assert _state(admin, job_id) == "blocked"
        with pool.connection() as conn, conn.transaction():
            assert queue.send_signal(job_id, "shipped", {"id": 2}, conn=conn) == "delivered"
        wait_for(lambda: _state(admin, job_id) == "succeeded", 30, "the job to resume")
    finally:
        worker.stop()
    job = admin.get_job(job_id)
    assert job is not None and job.result == {"id": 2} and job.current_attempt == 1
    assert queue.send_signal(MISSING, "shipped") == "not_found"
    with pytest.raises(WorkhorseValidationError) as refused:
        queue.send_signal(job_id, "", None)
    assert refused.value.field == "name"


def test_open_human_waits_page_with_filters_and_cursors(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    worker = Worker(queue, poll_ms=50, tick_ms=50)

    @worker.handler("review")
    def review(payload: Any, ctx: HandlerContext) -> Any:
        return ctx.wait_for_human(payload["wait"], context={"n": payload["n"]}).decision

    ids = queue.enqueue_many([{"type": "review", "payload": {"wait": "a" if n < 3 else "b", "n": n}} for n in range(5)])
    worker.start()
    try:
        wait_for(lambda: all(_state(admin, i) == "blocked" for i in ids), 30, "every job to park")
    finally:
        worker.stop()
    seen, cursor, pages = [], None, 0
    while True:
        page = admin.list_human_waits(name="a", limit=2, cursor=cursor)
        seen += page.items
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(w.job_id for w in seen) == sorted(ids[:3]) and pages == 2
    assert {w.name for w in seen} == {"a"} and all(w.choices is None and w.attempt == 1 for w in seen)
    only = admin.list_human_waits(job_id=ids[4]).items
    assert [(w.name, w.context, w.type, w.queue) for w in only] == [("b", {"n": 4}, "review", "default")]
    assert admin.list_human_waits(type="other").items == []
    with pytest.raises(InvalidCursorError):
        admin.list_human_waits(cursor=page_cursor_of_another_kind(admin))
    assert queue.complete_human_wait(ids[4], "b", {"ok": True}, actor="alice", reason="fine") == "completed"
    assert [w.job_id for w in admin.list_human_waits(name="b").items] == [ids[3]]


def page_cursor_of_another_kind(admin: Admin) -> str:
    """A cursor of the jobs listing, which the human-wait listing must refuse."""
    cursor = admin.list_jobs(limit=1).next_cursor
    assert cursor is not None
    return cursor


async def test_bad_arguments_of_the_handler_calls_are_refused_naming_the_field_before_anything_is_written(
    apool: AsyncConnectionPool[Any],
) -> None:
    queue, admin = AsyncQueue(apool), AsyncAdmin(apool)
    worker = AsyncWorker(queue, poll_ms=50, tick_ms=50)
    bad: list[Any] = [
        lambda ctx: ctx.wait_for_signal(""),
        lambda ctx: ctx.wait_for_signal("s", timeout_ms=0),
        lambda ctx: ctx.wait_for_human("h", choices=[]),
        lambda ctx: ctx.wait_for_human("h", choices=["a", "a"]),
        lambda ctx: ctx.wait_for_human("h", choices=[""]),
        lambda ctx: ctx.wait_for_human("h", context={1: "not a JSON key"}),
        lambda ctx: ctx.run_child("", "t", {}),
        lambda ctx: ctx.run_child("k", "bad type!", {}),
        lambda ctx: ctx.run_child("k", "t", {}, priority=101),
        lambda ctx: ctx.run_child("k", "t", {}, depends_on=[MISSING]),
        lambda ctx: ctx.run_children("k", []),
        lambda ctx: ctx.run_children("k", [{"type": "t"}]),
        lambda ctx: ctx.run_children("k", [{"type": "t", "payload": {}, "max_attempts": 0}]),
    ]

    @worker.handler("probe")
    async def probe(payload: Any, ctx: AsyncHandlerContext) -> Any:
        fields = []
        for call in bad:
            try:
                await call(ctx)
            except WorkhorseValidationError as error:
                fields.append(error.field)
        return fields

    job_id = await queue.enqueue("probe", {})
    running = asyncio.create_task(worker.run())
    try:
        for _ in range(600):
            job = await admin.get_job(job_id)
            if job is not None and job.state == "succeeded":
                break
            await asyncio.sleep(0.05)
    finally:
        await worker.stop()
        await running
    job = await admin.get_job(job_id)
    assert job is not None and job.result == [
        "name", "timeoutMs", "choices", "choices", "choices", 'context key 1', "key", "type", "priority",
        "dependsOn", "children", "children[0]", "children[0].maxAttempts",
    ]  # fmt: skip
    assert job.children == [] and (await admin.list_human_waits()).items == []
    kinds = [e.kind for e in (await admin.get_job_timeline(job_id)).items]
    assert kinds == ["enqueued", "claimed", "succeeded", "succeeded"]
