"""Must type-check under mypy --strict (tests/test_typed_jobs.py runs it): typed jobs used right."""

from __future__ import annotations

from typing import Any, TypedDict

from psycopg_pool import ConnectionPool

from workhorse import HandlerContext, JobDefinition, Queue, Worker
from workhorse.aio import AsyncHandlerContext, AsyncWorker


class Email(TypedDict):
    to: str


class Sent(TypedDict):
    messageId: str


SEND = JobDefinition[Email, Sent]("email.send", queue="mail")


def use(pool: ConnectionPool[Any], worker: Worker, aworker: AsyncWorker) -> str:
    queue = Queue(pool)

    @worker.job(SEND)
    def send(payload: Email, ctx: HandlerContext) -> Sent:
        return {"messageId": payload["to"]}

    async def send_async(payload: Email, ctx: AsyncHandlerContext) -> Sent:
        return {"messageId": payload["to"]}

    aworker.handle(SEND, send_async)
    queue.enqueue_many([SEND.request(Email(to="b@example.com"), priority=2)])
    job = queue.get_job("id", SEND)
    if job is not None and job.result is not None:
        message_id: str = job.result["messageId"]
        to: str = job.payload["to"]
        return message_id + to
    # A TypedDict payload is built by its type (mypy takes no context for a bare dict literal
    # from the definition); models and dataclasses are passed as they are.
    return queue.enqueue(SEND, Email(to="a@example.com"), priority=1)
