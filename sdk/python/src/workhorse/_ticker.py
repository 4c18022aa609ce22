"""Maintenance: offers ``tick_v1`` (recovery of expired leases, promotion of due jobs, schedules)
about once per ``tick_ms``, jittered so that many workers do not tick together. Before its first
tick it registers the retry policies of the worker's handlers (``register_handlers_v1``, as the
TypeScript worker's ticker does), so that the attempts the server closes itself (execution
timeouts, expired leases) follow them; a failed registration is reported and tried again with
the next tick."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Sequence

from . import _protocol as p
from ._drivers import Statements
from .types import RetryPolicy

#: A handler as the server needs to know it: its job type and its own retry policy, if any.
HandlerPolicy = tuple[str, RetryPolicy | None]


async def run_ticks(
    statements: Statements,
    tick_ms: int,
    report: Callable[[str, BaseException], None],
    worker_id: str = "",
    queues: Sequence[str] = (),
    policies: Sequence[HandlerPolicy] = (),
) -> None:
    """Ticks until cancelled; a failed tick is reported and the next one comes as planned."""
    delay = 0.0
    registered = not policies
    while True:
        await asyncio.sleep(delay)
        try:
            if not registered:
                items = [{"type": t, "retryPolicy": policy} for t, policy in policies]
                await statements.rows(p.REGISTER_HANDLERS_SQL, (worker_id, list(queues), json.dumps(items)))
                registered = True
            await statements.rows(p.TICK_SQL, ())
        except Exception as error:
            report("tick", error)
        delay = tick_ms * (0.8 + random.random() * 0.4) / 1000
