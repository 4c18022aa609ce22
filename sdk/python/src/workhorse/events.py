"""What a worker reports, as the TypeScript (``worker.on``) and Go (``OnEvent``) workers do, under
the same names: subscribe with ``worker.on(listener)`` (every event) or ``worker.on(name,
listener)`` (one name). Listeners run in the worker's event loop thread and must return quickly;
one that raises is logged and otherwise ignored. Every event is also logged on the ``workhorse``
logger at a fitting level (a lost lease, an abandoned handler, a timeout and an internal error
at WARNING, a failed job at WARNING, a retry at INFO, the rest at DEBUG or INFO).

Example::

    worker.on("job.failed", lambda event: alerts.send(event.job_id, event.error))
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from time import monotonic
from typing import Any, Literal, get_args

log = logging.getLogger("workhorse")

WorkerEventName = Literal[
    "worker.started",
    "job.claimed",
    "job.succeeded",
    "job.retry_scheduled",
    "job.failed",
    "job.canceled",
    "job.lease_lost",
    "job.released",
    "job.sleeping",
    "job.blocked",
    "job.abandoned",
    "worker.error",
    "worker.stopped",
    "worker.draining",
]
#: Every event name, in lifecycle order.
WORKER_EVENT_NAMES: tuple[WorkerEventName, ...] = get_args(WorkerEventName)


@dataclass(frozen=True)
class WorkerEvent:
    """One thing a worker reports. ``job_id``, ``type``, ``queue`` and ``attempt`` are set for the
    ``job.*`` events; the others where they apply."""

    name: WorkerEventName
    worker_id: str
    job_id: str | None = None
    type: str | None = None
    queue: str | None = None
    attempt: int | None = None
    #: How long the attempt had run (job events after ``job.claimed``).
    duration_ms: int | None = None
    #: The error envelope of ``job.failed`` and ``job.retry_scheduled``; the raised error's text
    #: for ``worker.error``.
    error: Any = None
    #: ``job.retry_scheduled``: when the next attempt runs; ``job.sleeping``: when the job wakes.
    run_at: datetime | None = None
    #: ``job.released`` and ``job.abandoned``: why (``timeout``, ``canceled``, ``lease_lost``,
    #: ``shutdown``); ``job.blocked``: what the job waits for; ``worker.error``: what the worker
    #: was doing (``claim``, ``heartbeat``, ``tick``, ``report``, ``listen``, ...).
    reason: str | None = None
    #: ``worker.draining``: the jobs it holds; ``worker.started``: its concurrency.
    count: int | None = None


WorkerEventListener = Callable[[WorkerEvent], None]

_LEVELS: dict[str, int] = {
    "worker.started": logging.INFO,
    "job.claimed": logging.DEBUG,
    "job.succeeded": logging.DEBUG,
    "job.retry_scheduled": logging.INFO,
    "job.failed": logging.WARNING,
    "job.canceled": logging.INFO,
    "job.lease_lost": logging.WARNING,
    "job.released": logging.INFO,
    "job.sleeping": logging.DEBUG,
    "job.blocked": logging.DEBUG,
    "job.abandoned": logging.WARNING,
    "worker.error": logging.WARNING,
    "worker.stopped": logging.INFO,
    "worker.draining": logging.WARNING,
}


class EventHub:
    """The listeners of one worker, and the log line of each event."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self._listeners: list[tuple[str | None, WorkerEventListener]] = []

    def worker(self, name: WorkerEventName, **fields: Any) -> None:
        self.emit(WorkerEvent(name, self.worker_id, **fields))

    def job(self, name: WorkerEventName, run: Any, **fields: Any) -> None:
        """An event of a run (a ``_execution.Run``), with its duration unless it was just claimed."""
        job = run.job
        if name != "job.claimed":
            fields.setdefault("duration_ms", int((monotonic() - run.started_at) * 1000))
        self.emit(WorkerEvent(name, self.worker_id, job.job_id, job.type, job.queue, job.attempt, **fields))

    def add(self, name: str | None, listener: WorkerEventListener) -> None:
        self._listeners.append((name, listener))

    def emit(self, event: WorkerEvent) -> None:
        level = _LEVELS[event.name]
        if log.isEnabledFor(level):
            log.log(level, "%s", _describe(event))
        for name, listener in self._listeners:
            if name is None or name == event.name:
                try:
                    listener(event)
                except Exception:
                    log.exception("A worker event listener failed on %s", event.name)


def _describe(event: WorkerEvent) -> str:
    parts = [f"Worker {event.worker_id}: {event.name}"]
    if event.job_id is not None:
        parts.append(f"job {event.job_id} ({event.type} on {event.queue}, attempt {event.attempt})")
    for label, value in (("after ms", event.duration_ms), ("reason", event.reason), ("at", event.run_at), ("count", event.count)):
        if value is not None:
            parts.append(f"{label} {value}")
    if event.error is not None:
        parts.append(f"error {event.error}")
    return ", ".join(parts)
