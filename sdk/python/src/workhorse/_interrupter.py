"""Everything that stops a handler from outside: its execution timeout, a lost lease or a cancel
request (the heartbeater's news), a durable sleep or a parking wait (its context's). The handler
is told through ``ctx.signal`` (a coroutine is also cancelled); how the run ended is noted on it
for the outcome recorder. The ``RunningWorker`` of handler contexts and the heartbeater's
``LeaseListener``."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from ._execution import Run, abort
from .errors import ExecutionTimeoutError, JobCanceledError, JobSleeping, JobWaiting, LeaseLostError
from .events import EventHub

log = logging.getLogger("workhorse")


class Interrupter:
    def __init__(self, running: dict[str, Run], events: EventHub) -> None:
        #: The jobs being run, by job id (the engine's).
        self._running = running
        self._events = events

    def start_timeout(self, run: Run, timeout_ms: int) -> None:
        run.timer = asyncio.get_running_loop().call_later(timeout_ms / 1000, self._timed_out, run, timeout_ms)

    def _timed_out(self, run: Run, timeout_ms: int) -> None:
        if run.outcome is None:
            run.outcome = "timeout"
            log.warning(
                "Worker %s: job %s (%s) ran past its execution timeout of %d ms: its handler is told to stop "
                "and the attempt fails as timed out", run.job.worker_id, run.job.job_id, run.job.type, timeout_ms,
            )  # fmt: skip
            abort(run, ExecutionTimeoutError(run.job.job_id, timeout_ms))

    def lost(self, job_id: str) -> None:
        run = self._running.get(job_id)
        if run is not None and run.outcome not in ("lost", "abandoned"):
            run.outcome = "lost"
            self._events.job("job.lease_lost", run)
            abort(run, LeaseLostError(job_id))

    def cancel_requested(self, job_id: str) -> None:
        run = self._running.get(job_id)
        if run is not None and run.outcome is None:
            run.outcome = "canceled"
            abort(run, JobCanceledError(job_id))

    def slept(self, job_id: str, wake_at: datetime) -> None:
        self.parked(job_id, JobSleeping(job_id, wake_at))

    def parked(self, job_id: str, reason: BaseException) -> None:
        run = self._running.get(job_id)
        if run is not None and run.outcome is None:
            run.outcome = "parked"
            run.renewing = False
            if isinstance(reason, JobSleeping):
                self._events.job("job.sleeping", run, run_at=reason.wake_at)
            else:
                waiting_for = reason.wait_for if isinstance(reason, JobWaiting) else "children"
                self._events.job("job.blocked", run, reason=waiting_for)
            # Not cancelled: the handler is inside the call that parked, which raises the reason itself.
            run.signal.abort(reason)
