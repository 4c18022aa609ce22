"""Maintenance: offers ``tick_v1`` (recovery of expired leases, promotion of due jobs, schedules)
about once per ``tick_ms``, jittered so that many workers do not tick together."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from . import _protocol as p
from ._drivers import Statements


async def run_ticks(statements: Statements, tick_ms: int, report: Callable[[str, BaseException], None]) -> None:
    """Ticks until cancelled; a failed tick is reported and the next one comes as planned."""
    delay = 0.0
    while True:
        await asyncio.sleep(delay)
        try:
            await statements.rows(p.TICK_SQL, ())
        except Exception as error:
            report("tick", error)
        delay = tick_ms * (0.8 + random.random() * 0.4) / 1000
