"""A worker's options, checked (the same rules and field names as the TypeScript worker), as the
worker's parts read them."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .types import WorkerOptions
from .validation import check_int, check_name, check_text, fail


@dataclass(frozen=True)
class EngineOptions:
    worker_id: str
    queues: list[str]
    concurrency: int
    lease_ms: int
    heartbeat_ms: int
    poll_ms: int
    tick_ms: int
    shutdown_timeout_ms: int
    listen: bool
    unknown_type_delay_ms: int


def engine_options(given: Mapping[str, Any]) -> EngineOptions:
    """Checks a worker's options (the same rules and field names as the TypeScript worker)."""
    for key in given:
        if key not in WorkerOptions.__annotations__:
            fail(key, f"is not a worker option ({', '.join(WorkerOptions.__annotations__)})")
    queues = given.get("queues", ("default",))
    if isinstance(queues, str) or not isinstance(queues, Sequence) or not 1 <= len(queues) <= 100:
        fail("queues", "must list 1 to 100 queue names")
    names = list(dict.fromkeys(check_name(q, f"queues[{i}]") for i, q in enumerate(queues)))
    lease = check_int(given.get("lease_ms", 30_000), "leaseMs", 1000, 86_400_000)
    listen = given.get("listen", True)
    if not isinstance(listen, bool):
        fail("listen", "must be True or False")
    worker_id = given.get("worker_id") or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    return EngineOptions(
        worker_id=check_text(worker_id, "workerId", 200, 1),
        queues=names,
        concurrency=check_int(given.get("concurrency", 10), "concurrency", 1, 1000),
        lease_ms=lease,
        heartbeat_ms=check_int(given.get("heartbeat_ms", lease // 3), "heartbeatMs", 100, lease),
        poll_ms=check_int(given.get("poll_ms", 1000), "pollMs", 10, 600_000),
        tick_ms=check_int(given.get("tick_ms", 1000), "tickMs", 10, 600_000),
        shutdown_timeout_ms=check_int(given.get("shutdown_timeout_ms", 25_000), "shutdownTimeoutMs", 0, 3_600_000),
        listen=listen,
        unknown_type_delay_ms=check_int(given.get("unknown_type_delay_ms", 5000), "unknownTypeDelayMs", 0, 604_800_000),
    )
