"""The worker's core, on asyncio, shared by ``Worker`` (sync handlers in threads) and
``AsyncWorker`` (coroutine handlers). The same protocol calls as the TypeScript worker:

* one ``complete_and_claim_v1`` round trip at a time records the completions that gathered
  since the last one and claims exactly the slots that will then be free, in one statement and
  one commit; completions arriving meanwhile go in the next round trip;
* ``heartbeat_many_v1`` renews every lease in one statement per interval, on a connection of
  its own, and reports canceled and lost jobs;
* LISTEN wakes the claim loop; polling (jittered, backing off while idle) stays the source of
  truth; ``tick_v1`` is offered about once per ``tick_ms``;
* failures go through ``fail_v1`` (retry policy, non-retryable errors, explicit delays),
  cancellations through ``acknowledge_cancel_v1``, unknown types through ``release_v1``;
* ``stop()`` stops claiming, lets running handlers finish for up to ``shutdown_timeout_ms``,
  then aborts the rest without recording anything for them (their leases expire);
* the worker reports itself in the registry of live workers every heartbeat interval and
  leaves it on stop; when an operator asks it to drain it claims no more and finishes what it
  holds (the process is stopped afterwards, as for the TypeScript worker).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from time import monotonic
from typing import Any, Literal

from . import _calls
from . import _protocol as p
from ._drivers import AsyncDriver, Statements
from ._failures import error_envelope, fail_options
from ._heartbeater import Heartbeater
from ._notifier import listen_for_work
from ._registration import Registration
from .context import AbortSignal, AsyncHandlerContext, ClaimedJob, HandlerContext, _Owner, wake_times
from .errors import (
    ExecutionTimeoutError,
    JobCanceledError,
    JobSleeping,
    LeaseLostError,
    WorkerShutdownError,
    WorkhorseError,
    from_db_error,
)
from .types import RetryPolicy
from .validation import to_json_text

log = logging.getLogger("workhorse")

#: The most jobs one round trip claims or completes (the limits of complete_and_claim_v1).
MAX_ROUND = 1000

#: Why a run ended other than by its handler's return or raise; `parked`: the job slept or parked
#: (children, a signal, a human decision) and the worker let go of it.
Outcome = Literal["lost", "canceled", "abandoned", "timeout", "parked"]
ErrorListener = Callable[[str, BaseException], None]


@dataclass(frozen=True)
class Handler:
    fn: Callable[..., Any]
    is_async: bool
    retry: RetryPolicy | None


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


@dataclass(eq=False)
class _Run:
    job: ClaimedJob
    signal: AbortSignal
    started_at: float
    #: Local deadline (monotonic seconds) after which the lease must be presumed lost.
    deadline: float
    renewing: bool = True
    outcome: Outcome | None = None
    task: asyncio.Future[Any] | None = None
    timer: asyncio.TimerHandle | None = None
    finished: bool = False

    @property
    def lease(self) -> tuple[str, int]:
        return self.job.job_id, self.job.fence


@dataclass(eq=False)
class _Completion:
    run: _Run
    result: str
    #: Sent alone: a batch it was in was refused, and the culprit must be found.
    alone: bool = False


class Engine:
    def __init__(
        self,
        driver: AsyncDriver,
        options: EngineOptions,
        handlers: dict[str, Handler],
        executor: Executor | None,
        on_error: ErrorListener | None,
        on_started: Callable[[], None] | None = None,
    ) -> None:
        self.options = options
        self._on_started = on_started
        self._driver = driver
        self._handlers = handlers
        self._executor = executor
        self._on_error = on_error
        self._running: dict[str, _Run] = {}
        self._pending: list[_Completion] = []
        self._claiming = False
        self._closing = False
        self._idle_rounds = 0
        self._statements: Statements | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._settling: set[asyncio.Future[None]] = set()
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

    # ---- lifecycle ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Claims and runs jobs until ``stop()`` has drained the worker."""
        self._statements = await self._driver.worker_pool(min(self.options.concurrency, 10) + 1)
        try:
            # A clear refusal of a schema this SDK does not speak, before anything else.
            present = _calls.schema_present()
            installed = None
            if present.convert(await self._statements.rows(present.sql, ())):
                version = _calls.schema_version()
                installed = version.convert(await self._statements.rows(version.sql, ()))
            _calls.check_schema_version(installed)
        except BaseException:
            await self._statements.close()
            raise
        self._claiming = True
        o = self.options
        heartbeater = Heartbeater(
            self._driver, o.worker_id, o.lease_ms, o.heartbeat_ms, self._running, self, self._report
        )
        self._registration = Registration(
            self._statements, o.worker_id, o.queues, o.concurrency, o.heartbeat_ms,
            lambda: len(self._running), self._drain_requested, self._report,
        )  # fmt: skip
        self._tasks = [
            asyncio.create_task(heartbeater.run()),
            asyncio.create_task(self._ticks()),
            asyncio.create_task(self._registration.run()),
        ]
        if self.options.listen:
            notifier = listen_for_work(self._driver, set(self.options.queues), self._wake.set, self._report)
            self._tasks.append(asyncio.create_task(notifier))
        self._pump = asyncio.create_task(self._pump_loop())
        self.started.set()
        if self._on_started is not None:
            self._on_started()
        log.info("Worker %s started on %s with concurrency %d", self.options.worker_id, self.options.queues, self.options.concurrency)
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
        self._claiming = False
        self._wake.set()
        timeout = self.options.shutdown_timeout_ms if shutdown_timeout_ms is None else shutdown_timeout_ms
        try:
            await asyncio.wait_for(self._all_done.wait(), timeout / 1000)
        except asyncio.TimeoutError:
            for run in list(self._running.values()):
                if run.outcome is None:
                    run.outcome = "abandoned"
                self._abort(run, WorkerShutdownError(run.job.job_id))
                self._finish(run)
        self._closing = True
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
        self._stopped.set()

    # ---- claiming and completing ----------------------------------------------------------------

    async def _pump_loop(self) -> None:
        failures = 0
        assert self._statements is not None
        while True:
            self._wake.clear()
            take = 1 if self._pending and self._pending[0].alone else MAX_ROUND
            batch = self._pending[:take]
            del self._pending[: len(batch)]
            free = self.options.concurrency - len(self._running) + len(batch)
            want = min(MAX_ROUND, free) if self._claiming else 0
            if not batch and want <= 0:
                if self._closing:
                    return
                await self._wake.wait()
                continue
            items = "[" + ",".join(f'{{"jobId":"{c.run.job.job_id}","fence":{c.run.job.fence},"result":{c.result}}}' for c in batch) + "]"
            try:
                rows = await self._statements.rows(
                    p.PUMP_SQL, (self.options.worker_id, items, self.options.queues, want, self.options.lease_ms)
                )
            except Exception as error:
                if isinstance(error, WorkhorseError):
                    # The database refused a result itself: alone, that fails the attempt; in a
                    # batch, each completion is sent on its own so only the culprit is refused.
                    if len(batch) == 1:
                        self._settle_later(batch[0].run, partial(self._settle_failure, batch[0].run, error))
                    else:
                        for c in batch:
                            c.alone = True
                        self._pending[:0] = batch
                    continue
                # Unreachable database or a commit of unknown fate: completions are tried again
                # while their leases hold (a repeat of one that committed answers `succeeded`).
                self._report("complete" if batch else "claim", error)
                failures += 1
                owned = [c for c in batch if c.run.outcome not in ("lost", "abandoned")]
                for c in batch:
                    if c not in owned:
                        self._finish(c.run)
                self._pending[:0] = owned
                await self._sleep_or_wake(min(2.0, 0.05 * 2**failures) * (0.5 + random.random() / 2))
                continue
            failures = 0
            first = 0
            unsucceeded: dict[str, str] = {}
            while first < len(rows) and rows[first][1] != "claimed":
                unsucceeded[rows[first][0]] = rows[first][1]
                first += 1
            for c in batch:
                self._completed(c.run, unsucceeded.get(c.run.job.job_id, "succeeded"))
            claimed = rows[first:]
            for row in claimed:
                self._start(row)
            if want > 0 and len(claimed) < want:
                self._idle_rounds += 1
                if not self._pending:
                    await self._sleep_or_wake(self._poll_delay())
            elif want > 0:
                self._idle_rounds = 0

    def _poll_delay(self) -> float:
        base = self.options.poll_ms * min(5.0, 1 + self._idle_rounds / 4)
        return base * (0.8 + random.random() * 0.4) / 1000

    async def _sleep_or_wake(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    def _wake_pump(self) -> None:
        self._wake.set()

    def _drain_requested(self) -> None:
        """An operator asked this worker to drain: it claims no more and finishes what it holds."""
        if self.drain_requested:
            return
        self.drain_requested = True
        self._claiming = False
        log.warning(
            "Worker %s drains (an operator asked): it claims no more jobs and finishes the %d it holds; "
            "stop its process once `workhorse workers list` shows it drained.",
            self.options.worker_id, len(self._running),
        )  # fmt: skip
        if not self._running and self._registration is not None:
            self._registration.report_soon()

    # ---- executing ------------------------------------------------------------------------------

    def _start(self, row: p.Row) -> None:
        job_id, _, queue, type, payload, attempt, max_attempts, fence, timeout_ms, checkpoints, waits = row
        job = ClaimedJob(
            job_id=job_id,
            queue=queue,
            type=type,
            attempt=attempt,
            max_attempts=max_attempts,
            fence=fence,
            worker_id=self.options.worker_id,
            checkpoints=p.parse_json(checkpoints) or {},
            waits=wake_times(p.parse_json(waits)),
        )
        now = monotonic()
        run = _Run(job=job, signal=AbortSignal(), started_at=now, deadline=now + self.options.lease_ms / 1000)
        self._running[job_id] = run
        self._all_done.clear()
        if timeout_ms is not None:
            run.timer = asyncio.get_running_loop().call_later(timeout_ms / 1000, self._timed_out, run, timeout_ms)
        handler = self._handlers.get(type)
        if handler is None:
            reason = f'no handler for job type "{type}" on worker {self.options.worker_id}'
            self._settle_later(run, partial(self._release, run, reason))
            return
        loop = asyncio.get_running_loop()
        assert self._statements is not None
        owner = _Owner(job, self, self._statements, run.signal)
        payload_value = p.parse_json(payload)
        if handler.is_async:
            run.task = loop.create_task(handler.fn(payload_value, AsyncHandlerContext(owner)))
        else:
            run.task = loop.run_in_executor(self._executor, handler.fn, payload_value, HandlerContext(owner, loop))
        run.task.add_done_callback(lambda task: self._handler_done(run, task))

    def _handler_done(self, run: _Run, task: asyncio.Future[Any]) -> None:
        thrown: BaseException | None
        if task.cancelled():
            thrown = run.signal.reason or asyncio.CancelledError()
        else:
            thrown = task.exception()
        if thrown is None and run.outcome in ("lost", "abandoned", "parked"):
            thrown = run.signal.reason
        if thrown is None:
            try:
                self._pending.append(_Completion(run, to_json_text(task.result(), "result")))
                self._wake.set()
                return
            except WorkhorseError as error:
                thrown = error
        self._settle_later(run, partial(self._settle_failure, run, thrown))

    def _settle_later(self, run: _Run, work: Callable[[], Awaitable[None]]) -> None:
        # The work's coroutine is made inside the task: a task canceled before its first step
        # (the loop closing) leaves no coroutine that was never awaited.
        async def settle() -> None:
            try:
                await work()
            except Exception as error:
                # Not recorded: the lease expires and the job runs again.
                self._report("complete", error)
            finally:
                self._finish(run)

        # The loop keeps only weak references to tasks: hold each until it is done.
        task = asyncio.ensure_future(settle())
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    def _completed(self, run: _Run, status: str) -> None:
        if status == "stale" and run.outcome != "abandoned":
            log.warning("Job %s: lease lost before its completion was recorded", run.job.job_id)
        self._finish(run)

    def _finish(self, run: _Run) -> None:
        if run.finished:
            return
        run.finished = True
        run.renewing = False
        if run.timer is not None:
            run.timer.cancel()
        if self._running.get(run.job.job_id) is run:
            del self._running[run.job.job_id]
        if not self._running:
            self._all_done.set()
            if self.drain_requested and self._registration is not None:
                # Reported at once, so the registry shows the worker drained.
                self._registration.report_soon()
        self._wake.set()

    def _abort(self, run: _Run, reason: BaseException) -> None:
        run.signal.abort(reason)
        # A coroutine handler is cancelled as well; a thread can only be told (ctx.signal).
        if run.task is not None and isinstance(run.task, asyncio.Task) and not run.task.done():
            run.task.cancel()

    def _timed_out(self, run: _Run, timeout_ms: int) -> None:
        if run.outcome is None:
            run.outcome = "timeout"
            self._abort(run, ExecutionTimeoutError(run.job.job_id, timeout_ms))

    # RunOwner and LeaseListener: what a handler's context and the heartbeater report.
    def lost(self, job_id: str) -> None:
        run = self._running.get(job_id)
        if run is not None and run.outcome not in ("lost", "abandoned"):
            run.outcome = "lost"
            self._abort(run, LeaseLostError(job_id))

    def cancel_requested(self, job_id: str) -> None:
        run = self._running.get(job_id)
        if run is not None and run.outcome is None:
            run.outcome = "canceled"
            self._abort(run, JobCanceledError(job_id))

    def slept(self, job_id: str, wake_at: datetime) -> None:
        self.parked(job_id, JobSleeping(job_id, wake_at))

    def parked(self, job_id: str, reason: BaseException) -> None:
        run = self._running.get(job_id)
        if run is not None and run.outcome is None:
            run.outcome = "parked"
            run.renewing = False
            # Not cancelled: the handler is inside the call that parked, which raises the reason itself.
            run.signal.abort(reason)

    async def _settle_failure(self, run: _Run, thrown: BaseException) -> None:
        job = run.job
        assert self._statements is not None
        if run.outcome == "parked":
            return
        if run.outcome in ("lost", "abandoned"):
            return
        if run.outcome == "canceled":
            await self._statements.rows(p.ACK_CANCEL_SQL, (job.job_id, self.options.worker_id, job.fence))
            return
        handler = self._handlers.get(job.type)
        options = fail_options(thrown, run.outcome, handler.retry if handler else None)
        envelope = error_envelope(thrown)
        rows = await self._statements.rows(
            p.FAIL_SQL, (job.job_id, self.options.worker_id, job.fence, json.dumps(envelope), json.dumps(options))
        )
        log.debug("Job %s attempt %d failed: %s", job.job_id, job.attempt, rows[0][0])

    async def _release(self, run: _Run, reason: str) -> None:
        assert self._statements is not None
        job = run.job
        await self._statements.rows(
            p.RELEASE_SQL, (job.job_id, self.options.worker_id, job.fence, self.options.unknown_type_delay_ms, reason)
        )

    # ---- heartbeats, notifications, maintenance -------------------------------------------------

    async def _ticks(self) -> None:
        assert self._statements is not None
        delay = 0.0
        while True:
            await asyncio.sleep(delay)
            try:
                await self._statements.rows(p.TICK_SQL, ())
            except Exception as error:
                self._report("tick", error)
            delay = self.options.tick_ms * (0.8 + random.random() * 0.4) / 1000

    def _report(self, during: str, error: BaseException) -> None:
        typed = from_db_error(error)
        log.warning("Worker %s: %s failed: %s", self.options.worker_id, during, typed)
        if self._on_error is not None:
            try:
                self._on_error(during, typed)
            except Exception:
                log.exception("on_error listener failed")
