"""Records how each job ended and frees its slot: a success that a round trip recorded, or a
failure, a release or a cancellation with a statement of its own (``fail_v1``, ``release_v1``,
``acknowledge_cancel_v1``). Recording is what a run's last step does, whatever its way through
the worker (lib/core/worker/outcome-recorder.ts in TypeScript)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial

from . import _protocol as p
from ._drivers import Statements
from ._execution import Handler, Run, abort
from ._failures import error_envelope, fail_options
from ._job_tracing import record_error, set_outcome
from ._worker_options import EngineOptions
from .events import EventHub

log = logging.getLogger("workhorse")


class OutcomeRecorder:
    def __init__(
        self,
        options: EngineOptions,
        running: dict[str, Run],
        handlers: dict[str, Handler],
        statements: Statements,
        wake: asyncio.Event,
        all_done: asyncio.Event,
        on_idle: Callable[[], None],
        report: Callable[[str, BaseException], None],
        events: EventHub,
    ) -> None:
        self._options = options
        self._events = events
        #: The jobs being run, by job id (the engine's).
        self._running = running
        self._handlers = handlers
        self._statements = statements
        #: Wakes the round trips: a slot is free.
        self._wake = wake
        #: Set while no job runs.
        self._all_done = all_done
        #: Called when the last running job is finished.
        self._on_idle = on_idle
        self._report = report
        self._settling: set[asyncio.Future[None]] = set()

    def completed(self, run: Run, status: str) -> None:
        """A round trip recorded the run's completion (or found it ``stale`` or ``canceled``)."""
        if status == "stale":
            if run.outcome != "abandoned":
                log.warning("Job %s: lease lost before its completion was recorded", run.job.job_id)
                self._events.job("job.lease_lost", run)
        else:
            self._events.job("job.succeeded" if status == "succeeded" else "job.canceled", run)
        if run.span is not None:
            set_outcome(run.span, _outcome_of(status))
        self.finish(run)

    def failed(self, run: Run, thrown: BaseException) -> None:
        """The handler raised, its result could not be used, or the database refused it."""
        self._settle_later(run, partial(self._record_failure, run, thrown))

    def release(self, run: Run, reason: str) -> None:
        """Hands the job back without using its attempt (no handler for its type)."""
        self._settle_later(run, partial(self._release, run, reason))

    def abandon(self, run: Run, reason: BaseException) -> None:
        """The worker gives up on a run still going at the end of its shutdown timeout: nothing is
        recorded for it (its lease expires) and its slot is free."""
        if run.outcome is None:
            run.outcome = "abandoned"
        self._events.job("job.abandoned", run, reason="shutdown")
        abort(run, reason)
        if run.span is not None:
            set_outcome(run.span, "lease_lost")
        self.finish(run)

    def finish(self, run: Run) -> None:
        """The job is over for this worker (recorded, given up or abandoned): its slot is free."""
        if run.finished:
            return
        run.finished = True
        run.renewing = False
        if run.timer is not None:
            run.timer.cancel()
        if run.span is not None:
            run.span.end()
        if self._running.get(run.job.job_id) is run:
            del self._running[run.job.job_id]
        if not self._running:
            self._all_done.set()
            self._on_idle()
        self._wake.set()

    def _settle_later(self, run: Run, work: Callable[[], Awaitable[None]]) -> None:
        # The work's coroutine is made inside the task: a task canceled before its first step
        # (the loop closing) leaves no coroutine that was never awaited.
        async def settle() -> None:
            try:
                await work()
            except Exception as error:
                # Not recorded: the lease expires and the job runs again.
                self._report("complete", error)
            finally:
                self.finish(run)

        # The loop keeps only weak references to tasks: hold each until it is done.
        task = asyncio.ensure_future(settle())
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def _record_failure(self, run: Run, thrown: BaseException) -> None:
        job, span = run.job, run.span
        if run.outcome == "parked":
            if span is not None:
                set_outcome(span, "parked")
            return
        if run.outcome in ("lost", "abandoned"):
            if span is not None:
                set_outcome(span, "lease_lost")
            return
        if run.outcome == "canceled":
            rows = await self._statements.rows(p.ACK_CANCEL_SQL, (job.job_id, self._options.worker_id, job.fence))
            if p.status_of(rows) == "canceled":
                self._events.job("job.canceled", run)
            if span is not None:
                set_outcome(span, _outcome_of(p.status_of(rows)))
            return
        if span is not None:
            record_error(span, thrown)
        handler = self._handlers.get(job.type)
        options = fail_options(thrown, run.outcome, handler.retry if handler else None)
        envelope = error_envelope(thrown)
        rows = await self._statements.rows(
            p.FAIL_SQL, (job.job_id, self._options.worker_id, job.fence, json.dumps(envelope), json.dumps(options))
        )
        status, run_at = rows[0][0], rows[0][1]
        if status == "retry_scheduled":
            self._events.job("job.retry_scheduled", run, error=envelope, run_at=run_at)
        elif status == "failed":
            self._events.job("job.failed", run, error=envelope)
        elif status == "canceled":
            self._events.job("job.canceled", run)
        elif status == "stale":
            self._events.job("job.lease_lost", run)
        if span is not None:
            set_outcome(span, _outcome_of(rows[0][0]))

    async def _release(self, run: Run, reason: str) -> None:
        job = run.job
        params = (job.job_id, self._options.worker_id, job.fence, self._options.unknown_type_delay_ms, reason)
        rows = await self._statements.rows(p.RELEASE_SQL, params)
        if p.status_of(rows) == "released":
            self._events.job("job.released", run, reason=reason)
        if run.span is not None:
            set_outcome(run.span, _outcome_of(p.status_of(rows)))


def _outcome_of(status: str) -> str:
    """A statement's answer as the span's ``workhorse.job.outcome`` (``stale``: the lease was lost)."""
    return "lease_lost" if status == "stale" else status
