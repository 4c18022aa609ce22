"""Renews every lease a worker holds in one ``heartbeat_many_v1`` statement per interval, on a
connection of its own so that busy handlers cannot starve renewal. A lease that could not be
renewed within its length is given up locally before the server could hand the job to someone
else; the server's answer reports canceled and lost jobs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from time import monotonic
from typing import Protocol

from . import _protocol as p
from ._drivers import AsyncDriver, Statements


class HeldLease(Protocol):
    """The worker's record of a running job, as the heartbeater reads and updates it."""

    #: Local deadline (monotonic seconds) after which the lease must be presumed lost.
    deadline: float
    #: Renewed while True; cleared when the worker no longer needs the lease or it is lost.
    renewing: bool

    @property
    def lease(self) -> tuple[str, int]:
        """The job id and the fence token of its claim."""
        ...


class LeaseListener(Protocol):
    def lost(self, job_id: str) -> None: ...

    def cancel_requested(self, job_id: str) -> None: ...


class Heartbeater:
    def __init__(
        self,
        driver: AsyncDriver,
        worker_id: str,
        lease_ms: int,
        interval_ms: int,
        leases: Mapping[str, HeldLease],
        listener: LeaseListener,
        report: Callable[[str, BaseException], None],
    ) -> None:
        self._driver = driver
        self._worker_id = worker_id
        self._lease_ms = lease_ms
        self._interval_ms = interval_ms
        self._leases = leases
        self._listener = listener
        self._report = report

    async def run(self) -> None:
        connection: Statements | None = None
        interval = self._interval_ms / 1000
        lease_s = self._lease_ms / 1000
        try:
            while True:
                await asyncio.sleep(interval)
                now = monotonic()
                batch = []
                for job_id, held in list(self._leases.items()):
                    if not held.renewing:
                        continue
                    if now >= held.deadline:
                        held.renewing = False
                        self._listener.lost(job_id)
                    else:
                        batch.append(held.lease)
                if not batch:
                    continue
                leases = "[" + ",".join(f'{{"jobId":"{job_id}","fence":{fence}}}' for job_id, fence in batch) + "]"
                sent_at = monotonic()
                try:
                    connection = connection or await self._driver.dedicated()
                    rows = await connection.rows(p.HEARTBEAT_SQL, (self._worker_id, leases, self._lease_ms))
                except Exception as error:
                    self._report("heartbeat", error)
                    if connection is not None:
                        await close_quietly(connection)
                    connection = None
                    continue
                for job_id, status in rows:
                    entry = self._leases.get(job_id)
                    if entry is None or not entry.renewing:
                        continue
                    if status == "stale":
                        entry.renewing = False
                        self._listener.lost(job_id)
                    elif status != "busy":
                        # The server renewed the lease after we sent the request: a safe bound.
                        entry.deadline = sent_at + lease_s
                        if status == "cancel_requested":
                            self._listener.cancel_requested(job_id)
        finally:
            if connection is not None:
                await close_quietly(connection)


async def close_quietly(statements: Statements) -> None:
    try:
        await statements.close()
    except Exception:
        pass
