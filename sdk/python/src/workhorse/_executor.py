"""Runs claimed jobs: a run's record, its execution timeout, and its handler (a coroutine in the
worker's loop, or a plain function in the worker's threads) with a context that owns the job.
A handler's return becomes a completion for the next round trip; a raise, or a result that is
not JSON, goes to the outcome recorder (lib/core/worker/executor.ts in TypeScript)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from time import monotonic
from typing import Any

from . import _protocol as p
from ._drivers import Statements
from ._execution import Completion, Handler, Run
from ._interrupter import Interrupter
from ._job_tracing import JobTracing, await_in_span, call_in_span
from ._outcome_recorder import OutcomeRecorder
from ._transactional import run_async, run_sync
from ._worker_options import EngineOptions
from .context import AbortSignal, AsyncHandlerContext, ClaimedJob, HandlerContext, _JobCalls, wake_times
from .errors import JobCanceledError, WorkhorseError
from .events import EventHub
from .validation import to_json_text


class JobExecutor:
    def __init__(
        self,
        options: EngineOptions,
        handlers: dict[str, Handler],
        threads: Executor | None,
        statements: Statements,
        running: dict[str, Run],
        pending: list[Completion],
        wake: asyncio.Event,
        all_done: asyncio.Event,
        interrupter: Interrupter,
        recorder: OutcomeRecorder,
        tracing: JobTracing | None,
        events: EventHub,
    ) -> None:
        self._events = events
        self._options = options
        self._handlers = handlers
        #: Where plain functions run (None when every handler is a coroutine function).
        self._threads = threads
        self._statements = statements
        #: The jobs being run, by job id (the engine's).
        self._running = running
        #: Completions waiting for the next round trip, which ``wake`` starts.
        self._pending = pending
        self._wake = wake
        #: Set while no job runs.
        self._all_done = all_done
        self._interrupter = interrupter
        self._recorder = recorder
        #: The job tracing while the worker runs with an OpenTelemetry SDK; None without one.
        self._tracing = tracing

    def start(self, row: p.Row) -> None:
        """Runs one job of a claim (its row of ``complete_and_claim_v1``)."""
        job_id, _, queue, type, payload, attempt, max_attempts, fence, timeout_ms, checkpoints, sleeps, trace_context = row
        job = ClaimedJob(
            job_id=job_id,
            queue=queue,
            type=type,
            attempt=attempt,
            max_attempts=max_attempts,
            fence=fence,
            worker_id=self._options.worker_id,
            checkpoints=p.parse_json(checkpoints) or {},
            sleeps=wake_times(p.parse_json(sleeps)),
        )
        now = monotonic()
        run = Run(job=job, signal=AbortSignal(), started_at=now, deadline=now + self._options.lease_ms / 1000)
        if self._tracing is not None:
            run.span = self._tracing.start_attempt(job, trace_context)
        self._running[job_id] = run
        self._all_done.clear()
        self._events.job("job.claimed", run)
        if timeout_ms is not None:
            self._interrupter.start_timeout(run, timeout_ms)
        handler = self._handlers.get(type)
        if handler is None:
            self._recorder.release(run, f'no handler for job type "{type}" on worker {self._options.worker_id}')
            return
        loop = asyncio.get_running_loop()
        calls = _JobCalls(job, self._interrupter, self._statements, run.signal)
        payload_value = p.parse_json(payload)
        if handler.decode is not None:
            try:
                payload_value = handler.decode(job_id, payload_value)
            except Exception as error:
                # Permanent (PayloadDecodeError is not retryable): the same payload fails every attempt.
                self._recorder.failed(run, error)
                return
        if handler.transaction_pool is not None:
            self._start_transaction(run, handler, payload_value, calls, loop)
            return
        if run.span is not None:
            # The handler runs with its attempt's span active (its spans and enqueues belong to it).
            if handler.is_async:
                run.task = loop.create_task(await_in_span(run.span, handler.fn, payload_value, AsyncHandlerContext(calls)))
            else:
                context = HandlerContext(calls, loop)
                run.task = loop.run_in_executor(self._threads, call_in_span, run.span, handler.fn, payload_value, context)
        elif handler.is_async:
            run.task = loop.create_task(handler.fn(payload_value, AsyncHandlerContext(calls)))
        else:
            run.task = loop.run_in_executor(self._threads, handler.fn, payload_value, HandlerContext(calls, loop))
        run.task.add_done_callback(lambda task: self._handler_done(run, task))

    def _start_transaction(self, run: Run, handler: Handler, payload: Any, calls: _JobCalls, loop: asyncio.AbstractEventLoop) -> None:
        """A transactional handler: its writes and ``complete_v1`` share one transaction."""
        pool = handler.transaction_pool
        if handler.is_async:
            run.task = loop.create_task(run_async(pool, handler.fn, payload, AsyncHandlerContext(calls), run.job))
        else:
            run.task = loop.run_in_executor(self._threads, run_sync, pool, handler.fn, payload, HandlerContext(calls, loop), run.job)
        run.task.add_done_callback(lambda task: self._transaction_done(run, task))

    def _transaction_done(self, run: Run, task: asyncio.Future[Any]) -> None:
        if task.cancelled() or task.exception() is not None:
            self._handler_done(run, task)  # rolled back: recorded as the failure it is
        elif task.result() == "canceled":
            # Rolled back with the refused result: the cancellation is acknowledged on its own.
            run.outcome = "canceled"
            self._recorder.failed(run, JobCanceledError(run.job.job_id))
        else:
            # complete_v1 answered (it checked the fence): committed when ``succeeded``.
            self._recorder.completed(run, task.result())

    def _handler_done(self, run: Run, task: asyncio.Future[Any]) -> None:
        thrown: BaseException | None
        if task.cancelled():
            thrown = run.signal.reason or asyncio.CancelledError()
        else:
            thrown = task.exception()
        if thrown is None and run.outcome in ("lost", "abandoned", "parked"):
            thrown = run.signal.reason
        if thrown is None:
            try:
                self._pending.append(Completion(run, to_json_text(task.result(), "result")))
                self._wake.set()
                return
            except WorkhorseError as error:
                thrown = error
        self._recorder.failed(run, thrown)
