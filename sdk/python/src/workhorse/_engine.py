"""The worker's core, on asyncio, shared by ``Worker`` (sync handlers in threads) and
``AsyncWorker`` (coroutine handlers): its lifecycle, and the parts it wires together. The same
protocol calls as the TypeScript worker (lib/core/worker/), one part per module:

* ``_round_trips``: one ``complete_and_claim_v1`` round trip at a time records the completions
  that gathered since the last one and claims the slots that will then be free;
* ``_executor``: runs each claimed job's handler; ``_interrupter``: timeouts, lost leases,
  cancel requests, sleeps and parking waits stop it from outside;
* ``_outcome_recorder``: failures through ``fail_v1`` (retry policy, non-retryable errors,
  explicit delays), cancellations through ``acknowledge_cancel_v1``, unknown types through
  ``release_v1``, and the freed slot;
* ``_heartbeater``: ``heartbeat_many_v1`` renews every lease in one statement per interval, on
  a connection of its own, and reports canceled and lost jobs;
* ``_notifier`` (LISTEN wakes the round trips), ``_ticker`` (``tick_v1`` about once per
  ``tick_ms``), ``_registration`` (the registry of live workers, and drain requests).

``stop()`` stops claiming, lets running handlers finish for up to ``shutdown_timeout_ms``, then
aborts the rest without recording anything for them (their leases expire). When an operator
asks the worker to drain it claims no more and finishes what it holds (the process is stopped
afterwards, as for the TypeScript worker).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor

from . import _calls
from ._drivers import AsyncDriver, Statements
from . import _job_tracing
from ._execution import Completion, Handler, Run
from ._executor import JobExecutor
from ._heartbeater import Heartbeater
from ._interrupter import Interrupter
from ._notifier import listen_for_work
from ._outcome_recorder import OutcomeRecorder
from ._registration import Registration
from ._round_trips import RoundTrips
from ._ticker import run_ticks
from ._worker_options import EngineOptions
from .errors import WorkerShutdownError, from_db_error
from .events import EventHub
from .types import RetryPolicy

log = logging.getLogger("workhorse")

ErrorListener = Callable[[str, BaseException], None]

__all__ = ["Engine", "EngineOptions", "ErrorListener", "Handler"]


class Engine:
    def __init__(
        self,
        driver: AsyncDriver,
        options: EngineOptions,
        handlers: dict[str, Handler],
        executor: Executor | None,
        on_error: ErrorListener | None,
        on_started: Callable[[], None] | None = None,
        events: EventHub | None = None,
    ) -> None:
        self.options = options
        self.events = events or EventHub(options.worker_id)
        self._on_started = on_started
        self._driver = driver
        self._handlers = handlers
        self._executor = executor
        self._on_error = on_error
        self._running: dict[str, Run] = {}
        self._pending: list[Completion] = []
        self._statements: Statements | None = None
        self._round_trips: RoundTrips | None = None
        self._recorder: OutcomeRecorder | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._pump: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._all_done = asyncio.Event()
        self._all_done.set()
        self._stopped = asyncio.Event()
        self._stopping: asyncio.Task[None] | None = None
        self._registration: Registration | None = None
        #: An operator asked this worker to drain (``workhorse workers drain``): it claims no more.
        self.drain_requested = False
        self.started = asyncio.Event()

    @property
    def active_count(self) -> int:
        return len(self._running)

    async def run(self) -> None:
        """Claims and runs jobs until ``stop()`` has drained the worker."""
        statements = await self._driver.worker_pool(min(self.options.concurrency, 10) + 1)
        self._statements = statements
        try:
            # A clear refusal of a schema this SDK does not speak, before anything else.
            _calls.check_schema_version(await _calls.aread_installed_schema(statements.rows))
        except BaseException:
            await statements.close()
            raise
        o = self.options
        running, pending, wake = self._running, self._pending, self._wake
        interrupter = Interrupter(running, self.events)
        recorder = OutcomeRecorder(
            o, running, self._handlers, statements, wake, self._all_done, self._idle, self._report, self.events
        )
        executor = JobExecutor(
            o, self._handlers, self._executor, statements, running, pending, wake, self._all_done, interrupter, recorder,
            _job_tracing.active(), self.events,
        )  # fmt: skip
        self._recorder = recorder
        self._round_trips = RoundTrips(o, statements, running, pending, wake, executor.start, recorder, self._report)
        heartbeater = Heartbeater(self._driver, o.worker_id, o.lease_ms, o.heartbeat_ms, running, interrupter, self._report)
        self._registration = Registration(
            statements, o.worker_id, o.queues, o.concurrency, o.heartbeat_ms,
            lambda: len(running), self._drain_requested, self._report,
        )  # fmt: skip
        self._tasks = [
            asyncio.create_task(heartbeater.run()),
            asyncio.create_task(run_ticks(statements, o.tick_ms, self._report, o.worker_id, o.queues, self._policies())),
            asyncio.create_task(self._registration.run()),
        ]
        if o.listen:
            self._tasks.append(asyncio.create_task(listen_for_work(self._driver, set(o.queues), wake.set, self._report)))
        self._pump = asyncio.create_task(self._round_trips.run())
        self.started.set()
        if self._on_started is not None:
            self._on_started()
        log.info("Worker %s started on %s with concurrency %d", o.worker_id, o.queues, o.concurrency)
        self.events.worker("worker.started", count=o.concurrency)
        await self._stopped.wait()

    def request_stop(self) -> None:
        """Starts a graceful stop (safe to call from a signal handler in the loop)."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._drain())

    async def stop(self, shutdown_timeout_ms: int | None = None) -> None:
        if not self.started.is_set():
            return
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._drain(shutdown_timeout_ms))
        await asyncio.shield(self._stopping)

    async def _drain(self, shutdown_timeout_ms: int | None = None) -> None:
        assert self._round_trips is not None and self._recorder is not None
        self._round_trips.claiming = False
        self._wake.set()
        timeout = self.options.shutdown_timeout_ms if shutdown_timeout_ms is None else shutdown_timeout_ms
        try:
            await asyncio.wait_for(self._all_done.wait(), timeout / 1000)
        except asyncio.TimeoutError:
            for run in list(self._running.values()):
                self._recorder.abandon(run, WorkerShutdownError(run.job.job_id))
        self._round_trips.closing = True
        self._wake.set()
        if self._pump is not None:
            await self._pump
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._registration is not None:
            await self._registration.unregister()
        if self._statements is not None:
            await self._statements.close()
        log.info("Worker %s stopped", self.options.worker_id)
        self.events.worker("worker.stopped")
        self._stopped.set()

    def _policies(self) -> list[tuple[str, RetryPolicy | None]]:
        return [(t, h.retry) for t, h in self._handlers.items()]

    def _drain_requested(self) -> None:
        """An operator asked this worker to drain: it claims no more and finishes what it holds."""
        if self.drain_requested:
            return
        self.drain_requested = True
        if self._round_trips is not None:
            self._round_trips.claiming = False
        log.warning(
            "Worker %s drains (an operator asked): it claims no more jobs and finishes the %d it holds; "
            "stop its process once `workhorse workers list` shows it drained.",
            self.options.worker_id, len(self._running),
        )  # fmt: skip
        self.events.worker("worker.draining", count=len(self._running))
        if not self._running and self._registration is not None:
            self._registration.report_soon()

    def _idle(self) -> None:
        """The last running job is finished."""
        if self.drain_requested and self._registration is not None:
            # Reported at once, so the registry shows the worker drained.
            self._registration.report_soon()

    def _report(self, during: str, error: BaseException) -> None:
        typed = from_db_error(error)
        log.warning("Worker %s: %s failed: %s", self.options.worker_id, during, typed)
        self.events.worker("worker.error", reason=during, error=f"{type(typed).__name__}: {typed}")
        if self._on_error is not None:
            try:
                self._on_error(during, typed)
            except Exception:
                log.exception("on_error listener failed")
