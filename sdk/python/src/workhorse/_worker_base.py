"""What ``Worker`` and ``AsyncWorker`` share: options, handler registration, the engine."""

from __future__ import annotations

import asyncio
import inspect
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ._drivers import AsyncDriver
from ._engine import Engine, ErrorListener, Handler
from ._worker_options import engine_options
from .errors import WorkerStateError
from .types import RetryPolicy, WorkerOptions
from .validation import check_name, check_retry_policy, fail

F = TypeVar("F", bound=Callable[..., Any])


class WorkerBase:
    def __init__(self, driver: AsyncDriver, options: WorkerOptions) -> None:
        self._driver = driver
        self._options = engine_options(options)
        self._on_error: ErrorListener | None = options.get("on_error")
        self._handlers: dict[str, Handler] = {}
        self._engine: Engine | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()

    @property
    def worker_id(self) -> str:
        return self._options.worker_id

    @property
    def types(self) -> list[str]:
        """Job types this worker has handlers for."""
        return list(self._handlers)

    def handle(self, type: str, fn: Callable[..., Any], *, retry: RetryPolicy | None = None) -> Any:
        """Registers the handler of one job type: a function ``(payload, ctx) -> result`` or a
        coroutine function. ``retry`` applies to this type's jobs enqueued without a retry
        policy of their own. Returns the worker, for chaining."""
        check_name(type, "type")
        if not callable(fn):
            fail("handler", "must be a function")
        policy = None if retry is None else check_retry_policy(retry, "retry")
        if type in self._handlers:
            raise WorkerStateError(f'A handler for job type "{type}" is already registered.')
        self._handlers[type] = Handler(fn, inspect.iscoroutinefunction(fn), policy)
        return self

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
        engine = Engine(self._driver, self._options, dict(self._handlers), executor, self._on_error, self._ready.set)
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
