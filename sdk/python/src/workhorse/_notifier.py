"""Wakes the worker when a queue it serves gains ready work (``pg_notify`` from the SQL
functions, delivered at commit). Polling stays the source of truth: a lost notification only
costs latency. A broken LISTEN connection is reopened with capped, jittered backoff, and the
worker is woken after each (re)connect in case something arrived meanwhile."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from ._drivers import AsyncDriver


async def listen_for_work(
    driver: AsyncDriver, queues: set[str], wake: Callable[[], None], report: Callable[[str, BaseException], None]
) -> None:
    failures = 0

    def on_payload(payload: str) -> None:
        if payload in queues:
            wake()

    def on_ready() -> None:
        nonlocal failures
        failures = 0
        wake()

    while True:
        try:
            await driver.listen(on_payload, on_ready)
        except Exception as error:
            report("listen", error)
        failures += 1
        await asyncio.sleep(min(30.0, 0.25 * 2 ** min(failures, 7)) * (0.5 + random.random() / 2))
