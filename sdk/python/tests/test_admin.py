"""Admin: paging with cursors, dead letters, redrive, queue pause."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from workhorse import Admin, InvalidCursorError, Queue, WorkhorseValidationError


def test_list_jobs_pages_newest_first_and_filters(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    ids = [queue.enqueue("t", {"i": i}, queue="a" if i % 2 else "b") for i in range(7)]
    seen: list[str] = []
    cursor = None
    while True:
        page = admin.list_jobs(limit=3, cursor=cursor)
        seen += [j.id for j in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == ids[::-1]
    assert [j.id for j in admin.list_jobs(queue="a").items] == [ids[5], ids[3], ids[1]]
    assert admin.list_jobs(states=["succeeded"]).items == []
    assert admin.get_job("01a22858-3d78-7624-95c6-4dc3ae0605a2") is None


def test_a_cursor_that_was_not_handed_out_is_refused(pool: ConnectionPool[Any]) -> None:
    with pytest.raises(InvalidCursorError):
        Admin(pool).list_jobs(cursor="bm90LWEtY3Vyc29y")
    with pytest.raises(WorkhorseValidationError) as raised:
        Admin(pool).list_jobs(states=["done"])  # type: ignore[list-item]
    assert raised.value.field == "states"


def test_pause_and_resume_a_queue(pool: ConnectionPool[Any]) -> None:
    admin = Admin(pool)
    Queue(pool).enqueue("t", {}, queue="mail")
    admin.pause_queue("mail", actor="ops", reason="maintenance")
    info = {q.queue: q for q in admin.list_queues()}["mail"]
    assert info.paused and info.changed_by == "ops" and info.ready == 1
    admin.resume_queue("mail")
    assert not {q.queue: q for q in admin.list_queues()}["mail"].paused


def test_redrive_many_in_a_dry_run_writes_nothing(pool: ConnectionPool[Any]) -> None:
    assert Admin(pool).redrive_many(request_id="r", dry_run=True) == []


def test_the_timeline_gives_each_event_the_login_role_that_wrote_it(pool: ConnectionPool[Any]) -> None:
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("t", {}, queue="attributed")
    assert admin.cancel(job_id, reason="not needed") == "canceled"
    with pool.connection() as conn:
        row = conn.execute("SELECT session_user::text").fetchone()
    assert row is not None
    entries = admin.get_job_timeline(job_id).items
    assert [(e.source, e.kind, e.login_role) for e in entries if e.source == "event"] == [
        ("event", "enqueued", row[0]),
        ("event", "canceled", row[0]),
    ]
