"""Operator actions on jobs: run now, reschedule, delete, and the bulk actions with a dry run,
sync (Psycopg) and async (Psycopg and asyncpg)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import Admin, JobActionRefusedError, Queue, WorkhorseValidationError
from workhorse.aio import AsyncAdmin, AsyncQueue


def later() -> datetime:
    return datetime.now(timezone.utc) + timedelta(hours=1)


def test_run_now_reschedule_and_delete(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    job = queue.enqueue("t", {}, queue="py-actions", run_at=later(), priority=5)
    assert admin.reschedule(job, priority=70, actor="ops") == "rescheduled"
    assert admin.get_job(job).priority == 70  # type: ignore[union-attr]
    assert admin.run_now(job, actor="ops", reason="now") == "ready"
    assert admin.run_now(job) == "already_ready"
    with pytest.raises(JobActionRefusedError) as refused:
        admin.delete_job(job)
    assert (refused.value.job_id, refused.value.action, refused.value.state) == (job, "delete", "ready")
    with pytest.raises(WorkhorseValidationError) as bad:
        admin.reschedule(job, priority=101)
    assert bad.value.field == "priority"


def test_bulk_cancel_counts_first_then_pages(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    ids = [queue.enqueue("mail", {"i": i}, queue="py-bulk", run_at=later()) for i in range(3)]
    preview = admin.cancel_matching(queue="py-bulk", dry_run=True, limit=2)
    assert (preview.dry_run, preview.matched, preview.more) == (True, 3, True)
    assert [s.id for s in preview.sample] == sorted(ids)
    first = admin.cancel_matching(queue="py-bulk", limit=2, actor="ops", reason="incident")
    assert (first.changed, first.outcomes, first.more) == (2, {"canceled": 2}, True)
    rest = admin.cancel_matching(queue="py-bulk", actor="ops", reason="incident")
    assert (rest.changed, rest.more) == (1, False)
    deleted = admin.delete_matching(queue="py-bulk", states=["canceled"], finished_after=datetime.now(timezone.utc) - timedelta(hours=1))
    assert sorted(deleted.job_ids) == sorted(ids)
    with pytest.raises(WorkhorseValidationError) as bad:
        admin.cancel_matching(colour="red")  # type: ignore[call-arg]
    assert bad.value.field == "filter.colour"


async def test_async_admin_runs_the_same_actions(apool: AsyncConnectionPool[Any], asyncpg_pool: Any) -> None:
    for p in (apool, asyncpg_pool):
        queue, admin = AsyncQueue(p), AsyncAdmin(p)
        job = await queue.enqueue("t", {}, queue="py-async-actions", run_at=later())
        result = await admin.run_now_matching(job_ids=[job], dry_run=True)
        assert (result.matched, result.sample[0].state) == (1, "scheduled")
        assert (await admin.run_now_matching(job_ids=[job], actor="ops")).job_ids == [job]
        assert await admin.reschedule(job, run_at=later()) == "rescheduled"
        assert (await admin.cancel_matching(job_ids=[job])).outcomes == {"canceled": 1}
        assert await admin.delete_job(job, actor="ops") == "deleted"
        with pytest.raises(JobActionRefusedError):
            await admin.run_now(await queue.enqueue("t", {}, queue="py-async-actions", depends_on=[await queue.enqueue("t", {}, queue="x", run_at=later())]))
