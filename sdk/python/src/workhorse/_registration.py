"""Keeps a worker in the registry of live workers (``report_worker_v2``, sql/095_workers.sql),
as the TypeScript worker does (lib/core/worker/registration.ts): a report every heartbeat
interval with the jobs it holds, whose answer says whether an operator asked it to drain
(``admin.drainWorker``, ``workhorse workers drain``); it leaves the registry when the worker
stops. The registry is for operators only: nothing of it runs per job, and a failed report
changes nothing but the row (which turns ``gone`` after three missed reports). The first report
registers and answers a secret that binds the row to this worker: later reports and the
unregistering present it; a refused report (``NotYoursError``: the row is gone, or another live
process holds the id) forgets it, so the next period registers again."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Callable
from datetime import datetime, timezone

from . import _protocol as p
from ._drivers import Statements
from ._version import __version__
from .errors import NotYoursError

#: What the registry's ``version`` says of a Python worker: its language, then the SDK's version
#: (a TypeScript worker reports its package version alone).
REPORTED_VERSION = f"python/{__version__}"


class Registration:
    def __init__(
        self,
        statements: Statements,
        worker_id: str,
        queues: list[str],
        concurrency: int,
        period_ms: int,
        in_flight: Callable[[], int],
        on_drain_requested: Callable[[], None],
        report_error: Callable[[str, BaseException], None],
    ) -> None:
        self._statements = statements
        self._worker_id = worker_id
        self._period = period_ms / 1000
        self._in_flight = in_flight
        self._on_drain_requested = on_drain_requested
        self._report_error = report_error
        self._info = json.dumps({
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": queues,
            "concurrency": concurrency,
            "version": REPORTED_VERSION,
            "startedAt": datetime.now(timezone.utc).isoformat(),
            "periodMs": period_ms,
        })  # fmt: skip
        self._soon = asyncio.Event()
        self._secret: str | None = None

    async def run(self) -> None:
        """Reports now, then every period (or sooner when asked) until cancelled."""
        while True:
            self._soon.clear()
            await self._report()
            try:
                await asyncio.wait_for(self._soon.wait(), self._period)
            except asyncio.TimeoutError:
                pass

    def report_soon(self) -> None:
        """Reports without waiting for the period (the worker's state changed)."""
        self._soon.set()

    async def _report(self) -> None:
        try:
            rows = await self._statements.rows(p.REPORT_WORKER_SQL, (self._worker_id, self._info, self._in_flight(), self._secret))
        except Exception as error:
            if isinstance(error, NotYoursError):
                self._secret = None
            self._report_error("report", error)
            return
        if rows[0][1] is not None:
            self._secret = str(rows[0][1])
        if rows[0][0]:
            self._on_drain_requested()

    async def unregister(self) -> None:
        """Leaves the registry (a failure is reported; the row then turns ``gone``)."""
        try:
            if self._secret is not None:
                await self._statements.rows(p.UNREGISTER_WORKER_SQL, (self._worker_id, self._secret))
            self._secret = None
        except Exception as error:
            self._report_error("report", error)
