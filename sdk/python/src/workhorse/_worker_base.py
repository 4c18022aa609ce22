"""What ``Worker`` and ``AsyncWorker`` share: options, handler registration, the engine."""

from __future__ import annotations

import asyncio
import inspect
import signal
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar, Unpack, overload

from ._drivers import AsyncDriver
from ._engine import Engine, ErrorListener, Handler
from ._worker_options import engine_options
from .context import AsyncHandlerContext, HandlerContext
from .errors import WorkerStateError
from .events import EventHub, WorkerEventListener, WorkerEventName, WORKER_EVENT_NAMES
from .jobs import JobDefinition
from .types import RetryPolicy, WorkerOptions
from .validation import check_name, check_retry_policy, fail

F = TypeVar("F", bound=Callable[..., Any])
P = TypeVar("P")
R = TypeVar("R")
W = TypeVar("W", bound="WorkerBase")

#: The handler of a typed job run in the worker's threads: ``(payload: P, ctx) -> R``.
SyncHandler = Callable[[P, HandlerContext], R]
#: The handler of a typed job run in the worker's event loop: ``async (payload: P, ctx) -> R``.
AsyncHandler = Callable[[P, AsyncHandlerContext], Awaitable[R]]


class JobRegistrar(Generic[P, R]):
    """What ``worker.job(definition)`` returns: a decorator that registers a handler of the
    definition's signature and gives it back unchanged."""

    def __init__(self, worker: WorkerBase, definition: JobDefinition[P, R], retry: RetryPolicy | None) -> None:
        self._worker, self._definition, self._retry = worker, definition, retry

    @overload
    def __call__(self, fn: AsyncHandler[P, R]) -> AsyncHandler[P, R]: ...
    @overload
    def __call__(self, fn: SyncHandler[P, R]) -> SyncHandler[P, R]: ...
    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        self._worker.handle(self._definition, fn, retry=self._retry)
        return fn


class WorkerBase:
    #: Whether transactional handlers are coroutine functions (``AsyncWorker``) or plain ones.
    _async_transactions = False

    def __init__(self, driver: AsyncDriver, options: WorkerOptions) -> None:
        self._driver = driver
        self._given: WorkerOptions = dict(options)  # type: ignore[assignment]
        self._options = engine_options(options)
        self._on_error: ErrorListener | None = options.get("on_error")
        self._handlers: dict[str, Handler] = {}
        self._engine: Engine | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._events = EventHub(self._options.worker_id)

    def configure(self: W, **options: Unpack[WorkerOptions]) -> W:
        """Changes options of a worker that is not running (the command line's ``--queues`` and
        ``--concurrency``), checked as the constructor checks them. Returns the worker."""
        if self._engine is not None:
            raise WorkerStateError("A running worker cannot be configured.")
        given: WorkerOptions = {**self._given, **options}
        given.setdefault("worker_id", self._options.worker_id)
        self._options = engine_options(given)
        self._given = given
        self._events.worker_id = self._options.worker_id
        return self

    @property
    def worker_id(self) -> str:
        return self._options.worker_id

    @property
    def types(self) -> list[str]:
        """Job types this worker has handlers for."""
        return list(self._handlers)

    @overload
    def handle(
        self: W, type: str, fn: Callable[..., Any], *, retry: RetryPolicy | None = None, transactional: bool = False
    ) -> W: ...
    @overload
    def handle(
        self: W,
        type: JobDefinition[P, R],
        fn: AsyncHandler[P, R] | SyncHandler[P, R],
        *,
        retry: RetryPolicy | None = None,
        transactional: bool = False,
    ) -> W: ...
    def handle(
        self: W,
        type: str | JobDefinition[Any, Any],
        fn: Callable[..., Any],
        *,
        retry: RetryPolicy | None = None,
        transactional: bool = False,
    ) -> W:
        """Registers the handler of one job type: a function ``(payload, ctx) -> result`` or a
        coroutine function. ``retry`` applies to this type's jobs enqueued without a retry
        policy of their own. Given a ``JobDefinition``, the handler must take its payload type
        and return its result type (``mypy`` checks it), and each payload is decoded by the
        definition's validator before the handler runs: one that does not decode fails the job
        at once (``PayloadDecodeError``). With ``transactional`` the handler runs in a
        transaction on a connection of the queue's pool (``ctx.conn``), and its success is
        recorded in that transaction: its writes and the job's completion commit together (a
        plain function in a ``Worker``, a coroutine function in an ``AsyncWorker``). Returns
        the worker, for chaining."""
        definition = type if isinstance(type, JobDefinition) else None
        name = type.type if isinstance(type, JobDefinition) else type
        check_name(name, "type")
        if not callable(fn):
            fail("handler", "must be a function")
        policy = None if retry is None else check_retry_policy(retry, "retry")
        if name in self._handlers:
            raise WorkerStateError(f'A handler for job type "{name}" is already registered.')
        decode = None if definition is None or definition.validator is None else definition.decode
        is_async = inspect.iscoroutinefunction(fn)
        if not isinstance(transactional, bool):
            fail("transactional", "must be True or False")
        pool = None
        if transactional:
            if is_async != self._async_transactions:
                kind = "coroutine functions in an AsyncWorker" if self._async_transactions else "plain functions in a Worker"
                fail("transactional", f"applies to {kind} (their connection is the queue's pool's)")
            pool = getattr(self, "queue").pool
        self._handlers[name] = Handler(fn, is_async, policy, decode, pool)
        return self

    def job(self, definition: JobDefinition[P, R], *, retry: RetryPolicy | None = None) -> JobRegistrar[P, R]:
        """Decorator form of ``handle`` for a typed job.

        Example::

            @worker.job(SEND_EMAIL)
            def send(payload: Email, ctx: HandlerContext) -> None:
                mailer.send(payload["to"])
        """
        return JobRegistrar(self, definition, retry)

    def handler(self, type: str, *, retry: RetryPolicy | None = None) -> Callable[[F], F]:
        """Decorator form of ``handle``.

        Example::

            @worker.handler("email.send")
            def send(payload, ctx):
                mailer.send(payload["to"])
        """

        def register(fn: F) -> F:
            self.handle(type, fn, retry=retry)
            return fn

        return register

    @overload
    def on(self: W, name: WorkerEventListener, /) -> W: ...
    @overload
    def on(self: W, name: WorkerEventName, listener: WorkerEventListener, /) -> W: ...
    def on(self: W, name: WorkerEventName | WorkerEventListener, listener: WorkerEventListener | None = None, /) -> W:
        """Subscribes ``listener`` to the worker's events of one name (``worker.on("job.failed",
        fn)``), or to every event (``worker.on(fn)``); see ``workhorse.events``. Listeners run in
        the worker's event loop thread and must return quickly. Returns the worker."""
        if callable(name) and listener is None:
            self._events.add(None, name)
            return self
        if name not in WORKER_EVENT_NAMES:
            fail("name", f"is not a worker event ({', '.join(WORKER_EVENT_NAMES)})")
        if not callable(listener):
            fail("listener", "must be a function")
        self._events.add(str(name), listener)
        return self

    @property
    def drain_requested(self) -> bool:
        """An operator asked this worker to drain (``workhorse workers drain``): it claims no
        more jobs and finishes those it holds; stop it once ``workhorse workers list`` shows it
        ``drained``."""
        return self._engine is not None and self._engine.drain_requested

    @property
    def active_count(self) -> int:
        """Handlers running now."""
        return 0 if self._engine is None else self._engine.active_count

    def wait_started(self, timeout: float | None = None) -> bool:
        """Blocks until the running worker claims (True), or ``timeout`` seconds pass."""
        return self._ready.wait(timeout)

    async def _serve(self, handle_signals: bool) -> None:
        """Runs the engine in the current event loop until it has drained. Plain functions run
        in a pool of ``concurrency`` threads, coroutine functions in the loop."""
        if self._engine is not None:
            raise WorkerStateError("This worker is already running.")
        executor = None
        if any(not h.is_async for h in self._handlers.values()):
            executor = ThreadPoolExecutor(max_workers=self._options.concurrency, thread_name_prefix="workhorse-handler")
        self._loop = asyncio.get_running_loop()
        self._ready.clear()
        engine = Engine(self._driver, self._options, dict(self._handlers), executor, self._on_error, self._ready.set, self._events)
        self._engine = engine
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        for sig in signals:
            self._loop.add_signal_handler(sig, engine.request_stop)
        try:
            await engine.run()
        finally:
            for sig in signals:
                self._loop.remove_signal_handler(sig)
            if executor is not None:
                # Threads of handlers abandoned at the shutdown timeout are not waited for.
                executor.shutdown(wait=False, cancel_futures=True)
            self._engine = None
