"""A worker's options, checked (the same rules and field names as the TypeScript worker), as the
worker's parts read them."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._limits import WORKER, heartbeat_not_below_lease
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


def _ranged(given: Mapping[str, Any], key: str, field: str) -> int:
    bounds = WORKER[field]
    return check_int(given.get(key, bounds["default"]), field, bounds["min"], bounds["max"])


def engine_options(given: Mapping[str, Any]) -> EngineOptions:
    """Checks a worker's options (the same rules and field names as the TypeScript worker, the
    bounds and defaults of limits.json)."""
    for key in given:
        if key not in WorkerOptions.__annotations__:
            fail(key, f"is not a worker option ({', '.join(WorkerOptions.__annotations__)})")
    queues = given.get("queues", tuple(WORKER["queues"]["default"]))
    low, high = WORKER["queues"]["min"], WORKER["queues"]["max"]
    if isinstance(queues, str) or not isinstance(queues, Sequence) or not low <= len(queues) <= high:
        fail("queues", f"must list {low} to {high} queue names")
    names = list(dict.fromkeys(check_name(q, f"queues[{i}]") for i, q in enumerate(queues)))
    lease = _ranged(given, "lease_ms", "leaseMs")
    beat = WORKER["heartbeatMs"]
    heartbeat = check_int(given.get("heartbeat_ms", lease // beat["defaultLeaseDivisor"]), "heartbeatMs", beat["min"], beat["max"])
    # A lease renewed no more often than it lasts lapses between two renewals (every SDK refuses it).
    if beat["belowLeaseMs"] and heartbeat >= lease:
        fail("heartbeatMs", heartbeat_not_below_lease(lease))
    listen = given.get("listen", True)
    if not isinstance(listen, bool):
        fail("listen", "must be True or False")
    worker_id = given.get("worker_id") or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    id_length = WORKER["workerIdLength"]
    return EngineOptions(
        worker_id=check_text(worker_id, "workerId", id_length["max"], id_length["min"]),
        queues=names,
        concurrency=_ranged(given, "concurrency", "concurrency"),
        lease_ms=lease,
        heartbeat_ms=heartbeat,
        poll_ms=_ranged(given, "poll_ms", "pollMs"),
        tick_ms=_ranged(given, "tick_ms", "tickMs"),
        shutdown_timeout_ms=_ranged(given, "shutdown_timeout_ms", "shutdownTimeoutMs"),
        listen=listen,
        unknown_type_delay_ms=_ranged(given, "unknown_type_delay_ms", "unknownTypeDelayMs"),
    )
