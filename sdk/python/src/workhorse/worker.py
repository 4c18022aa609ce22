"""``Worker``: claims jobs and runs their handlers, for sync programs."""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import Self, Unpack

from ._drivers import PsycopgDriver
from ._worker_base import WorkerBase
from .errors import WorkerStateError
from .queue import Queue
from .types import WorkerOptions


class Worker(WorkerBase):
    """Claims jobs from PostgreSQL and runs the handler registered for each job's type.

    Handlers are plain functions ``(payload, ctx)`` run in a pool of ``concurrency`` threads
    (coroutine functions are accepted too and run in the worker's event loop). The worker asks
    for exactly its free slots in one claim, batches completions into the next claim's round
    trip, renews every lease in one heartbeat per interval on a connection of its own, wakes on
    LISTEN/NOTIFY with polling as the fallback, offers maintenance ticks, and on SIGTERM (or
    ``stop()``) stops claiming and drains. It opens its own connections with the pool's
    connection settings.

    Example::

        worker = Worker(Queue(pool), concurrency=10)

        @worker.handler("email.send")
        def send(payload, ctx):
            mailer.send(payload["to"])

        worker.run()  # until SIGTERM or Ctrl+C

    As a context manager it runs in a background thread inside the block and drains when the
    block ends::

        with Worker(Queue(pool)).handle("email.send", send) as worker:
            ...
    """

    def __init__(self, queue: Queue, **options: Unpack[WorkerOptions]) -> None:
        """Options and defaults: see ``workhorse.WorkerOptions``."""
        pool = queue.pool
        #: The queue the worker was made with (``workhorse.testing.drain`` reads through its pool).
        self.queue = queue
        super().__init__(PsycopgDriver(pool.conninfo, pool.kwargs, None), options)
        self._thread: threading.Thread | None = None

    def run(self, *, handle_signals: bool = True) -> None:
        """Runs until SIGTERM or SIGINT (with ``handle_signals``, in the main thread) or
        ``stop()`` from another thread, then drains and returns."""
        asyncio.run(self._serve(handle_signals))

    def start(self) -> None:
        """Runs the worker in a background thread; returns once it claims (raises what stopped
        it from starting, such as an unknown schema version)."""
        if self._thread is not None:
            raise WorkerStateError("This worker is already running.")
        failure: list[BaseException] = []

        def main() -> None:
            try:
                self.run(handle_signals=False)
            except BaseException as error:
                failure.append(error)
            finally:
                self._ready.set()  # wakes start() when the worker could not start

        self._thread = threading.Thread(target=main, name=f"workhorse-worker-{self.worker_id}", daemon=True)
        self._thread.start()
        self._ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]

    def stop(self, *, shutdown_timeout_ms: int | None = None) -> None:
        """Stops claiming, lets running handlers finish for up to the shutdown timeout, then
        gives up on the rest without recording anything for them (their leases expire and
        another worker runs them again), and closes the worker's connections."""
        engine, loop = self._engine, self._loop
        if engine is not None and loop is not None:
            asyncio.run_coroutine_threadsafe(engine.stop(shutdown_timeout_ms), loop).result()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
