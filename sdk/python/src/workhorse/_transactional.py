"""Transactional handlers (``worker.handle(type, fn, transactional=True)``): the handler runs on
a connection of the application's pool inside a transaction (``ctx.conn``), and its success is
recorded by ``complete_v1`` in that same transaction, so the handler's writes and the job's
completion commit together or not at all (lib/core/worker/executor.ts in TypeScript). A
checkpoint saved in the handler is part of the transaction too; progress and sleeps commit on
their own. The completion answers ``succeeded``, or ``stale``/``canceled`` (the lease was lost or
the job canceled meanwhile): then the transaction is rolled back, the handler's writes with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from . import _protocol as p
from .context import ClaimedJob
from .errors import LeaseLostError, from_db_error
from .validation import to_json_text


class _NotCompleted(Exception):
    def __init__(self, status: str) -> None:
        self.status = status


def _complete_params(job: ClaimedJob, value: object) -> tuple[Any, ...]:
    return (job.job_id, job.worker_id, job.fence, to_json_text(value, "result"))


def run_sync(pool: Any, fn: Callable[..., Any], payload: Any, ctx: Any, job: ClaimedJob) -> str:
    """Runs a plain function's transaction on the pool (in a handler thread); the completion's status."""
    try:
        with pool.connection() as conn:
            try:
                with conn.transaction():
                    ctx._conn = conn
                    value = fn(payload, ctx)
                    with psycopg.RawCursor(conn) as cursor:
                        cursor.execute(p.COMPLETE_SQL, _complete_params(job, value))
                        row = cursor.fetchone()
                    status = str(row[0]) if row else "stale"
                    if status != "succeeded":
                        raise _NotCompleted(status)
            finally:
                ctx._conn = None
        return status
    except _NotCompleted as not_completed:
        return not_completed.status
    except psycopg.Error as error:
        raise from_db_error(error) from error


async def run_async(pool: Any, fn: Callable[..., Any], payload: Any, ctx: Any, job: ClaimedJob) -> str:
    """Runs a coroutine function's transaction on the pool (Psycopg async or asyncpg)."""
    try:
        if isinstance(pool, AsyncConnectionPool):
            async with pool.connection() as conn:
                async with conn.transaction():
                    ctx._conn = conn
                    value = await fn(payload, ctx)
                    async with psycopg.AsyncRawCursor(conn) as cursor:
                        await cursor.execute(p.COMPLETE_SQL, _complete_params(job, value))
                        row = await cursor.fetchone()
                    status = str(row[0]) if row else "stale"
                    if status != "succeeded":
                        raise _NotCompleted(status)
            return status
        async with pool.acquire() as conn:
            async with conn.transaction():
                ctx._conn = conn
                value = await fn(payload, ctx)
                status = str(await conn.fetchval(p.COMPLETE_SQL, *_complete_params(job, value)))
                if status != "succeeded":
                    raise _NotCompleted(status)
        return status
    except _NotCompleted as not_completed:
        return not_completed.status
    except psycopg.Error as error:
        raise from_db_error(error) from error
    finally:
        ctx._conn = None


def save_checkpoint_sync(conn: Any, job: ClaimedJob, name: str, text: str) -> Any:
    """A checkpoint saved in the handler's transaction (see ``_JobCalls.save_checkpoint``)."""
    with psycopg.RawCursor(conn) as cursor:
        cursor.execute(p.CHECKPOINT_SQL, (job.job_id, job.worker_id, job.fence, name, text))
        status, stored = cursor.fetchall()[0]
    return _stored(job, name, status, stored)


async def save_checkpoint_async(conn: Any, job: ClaimedJob, name: str, text: str) -> Any:
    params = (job.job_id, job.worker_id, job.fence, name, text)
    if isinstance(conn, psycopg.AsyncConnection):
        async with psycopg.AsyncRawCursor(conn) as cursor:
            await cursor.execute(p.CHECKPOINT_SQL, params)
            status, stored = (await cursor.fetchall())[0]
    else:
        status, stored = (await conn.fetch(p.CHECKPOINT_SQL, *params))[0]
    return _stored(job, name, status, stored)


def _stored(job: ClaimedJob, name: str, status: str, stored: str | None) -> Any:
    if status == "stale" or stored is None:
        raise LeaseLostError(job.job_id)
    entry = p.parse_json(stored)
    job.checkpoints[name] = entry
    return entry[0] if entry else None
