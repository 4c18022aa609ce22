"""Must NOT type-check: each line marked ``# wrong`` is an error mypy --strict reports
(tests/test_typed_jobs.py checks that every marked line, and no other, has one)."""

from __future__ import annotations

from typing import Any, TypedDict

from psycopg_pool import ConnectionPool

from workhorse import HandlerContext, JobDefinition, Queue, Worker


class Email(TypedDict):
    to: str


class Other(TypedDict):
    address: str


SEND = JobDefinition[Email, None]("email.send")


def use(pool: ConnectionPool[Any], worker: Worker) -> None:
    queue = Queue(pool)
    queue.enqueue(SEND, Email(to=1))  # wrong
    queue.enqueue(SEND, Other(address="a@example.com"))  # wrong
    queue.enqueue(SEND, 42)  # wrong
    queue.enqueue_many([SEND.request(Other(address="a@example.com"))])  # wrong

    def takes_an_int(payload: int, ctx: HandlerContext) -> None:
        pass

    def returns_a_str(payload: Email, ctx: HandlerContext) -> str:
        return payload["to"]

    worker.handle(SEND, takes_an_int)  # wrong
    worker.handle(SEND, returns_a_str)  # wrong

    @worker.job(SEND)  # wrong
    def no_context(payload: Email) -> None:
        pass

    job = queue.get_job("id", SEND)
    if job is not None:
        job.payload["address"]  # wrong
