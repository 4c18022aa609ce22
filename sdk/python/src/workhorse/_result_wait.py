"""Waiting for a job's result (``Queue.wait_for_result``, ``AsyncQueue.wait_for_result``): the
call reads the job through ``await_results_v1`` (which registers it, so its end notifies
``workhorse_results``) on a connection that LISTENs there first, then sleeps until a
notification names the job or the fallback poll (``results.pollMs`` of limits.json, 5 s) comes
round, and reads again. One connection per waiting call (the TypeScript SDK shares one among
all the waits of a process)."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Sequence
from typing import Any

from . import _protocol as p
from ._calls import Call
from ._drivers import AsyncDriver
from ._limits import RESULTS
from ._sync import SyncExecutor
from .errors import JobFailedError, JobNotFoundError, JobResultCanceledError, WaitForResultTimeoutError
from .validation import check_job_id, fail

#: Seconds between the fallback reads.
POLL_SECONDS: float = RESULTS["pollMs"]["default"] / 1000
_TTL = RESULTS["ttlSeconds"]
#: A registration outlives a few polls, each of which renews it.
TTL_SECONDS: int = min(_TTL["max"], max(_TTL["default"], math.ceil(3 * POLL_SECONDS)))

_LIVE = object()


def check_timeout(timeout: object) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout < 0:
        fail("timeout", "must be a number of seconds, 0 or more (or None: no timeout)")
    return float(timeout)


def _rows(rows: Sequence[p.Row]) -> Any:
    (job_id, state, result, error) = rows[0]
    if state == "live":
        return _LIVE
    if state == "succeeded":
        return None if result is None else json.loads(result)
    envelope = {} if error is None else json.loads(error)
    if state == "failed":
        raise JobFailedError(job_id, envelope)
    if state == "canceled":
        raise JobResultCanceledError(job_id, envelope)
    raise JobNotFoundError(job_id)


def await_result(job_id: str) -> Call[Any]:
    """Reads one awaited job: its result, ``_LIVE``, or raises its typed end."""
    return Call(p.AWAIT_RESULTS_SQL, ([job_id], TTL_SECONDS), _rows)


def _remaining(deadline: float | None) -> float:
    return POLL_SECONDS if deadline is None else min(POLL_SECONDS, deadline - time.monotonic())


def wait_sync(executor: SyncExecutor, job_id: str, timeout: object) -> Any:
    check_job_id(job_id)
    limit = check_timeout(timeout)
    deadline = None if limit is None else time.monotonic() + limit
    with executor.pool.connection() as conn:
        autocommit = conn.autocommit
        conn.autocommit = True
        try:
            conn.execute(p.LISTEN_RESULTS_SQL)
            while True:
                answer = executor.run(await_result(job_id), conn)
                if answer is not _LIVE:
                    return answer
                wait = _remaining(deadline)
                if wait <= 0:
                    raise WaitForResultTimeoutError(job_id, limit or 0.0)
                # (Psycopg keeps a notification that came during the read for notifies(); one
                # about another job sleeps on until ours or the poll.)
                until = time.monotonic() + wait
                heard = False
                while not heard and (left := until - time.monotonic()) > 0:
                    for notify in conn.notifies(timeout=left, stop_after=1):
                        heard = heard or (notify.channel == p.RESULTS_CHANNEL and job_id in notify.payload.split(","))
        finally:
            if not conn.closed:
                try:
                    conn.execute(p.UNLISTEN_RESULTS_SQL)
                finally:
                    conn.autocommit = autocommit


async def wait_async(driver: AsyncDriver, job_id: str, timeout: object) -> Any:
    check_job_id(job_id)
    limit = check_timeout(timeout)
    deadline = None if limit is None else time.monotonic() + limit
    woken = asyncio.Event()
    ready = asyncio.Event()

    def on_payload(payload: str) -> None:
        if job_id in payload.split(","):
            woken.set()

    listener = asyncio.create_task(driver.listen(on_payload, ready.set, p.RESULTS_CHANNEL))
    readied = asyncio.create_task(ready.wait())
    try:
        # Listening first, so an end after the registration is heard; a listener that cannot
        # connect leaves the poll.
        await asyncio.wait({listener, readied}, return_when=asyncio.FIRST_COMPLETED)
        while True:
            woken.clear()
            answer = await driver.run(await_result(job_id))
            if answer is not _LIVE:
                return answer
            wait = _remaining(deadline)
            if wait <= 0:
                raise WaitForResultTimeoutError(job_id, limit or 0.0)
            try:
                await asyncio.wait_for(woken.wait(), wait)
            except TimeoutError:
                pass
    finally:
        readied.cancel()
        listener.cancel()
        await asyncio.gather(listener, readied, return_exceptions=True)
