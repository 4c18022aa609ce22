"""What a handler gets besides its payload: who it is, a signal that fires on cancel, lease
loss, timeout or shutdown, durable checkpoints, progress and durable sleeps. ``HandlerContext``
for sync handlers (running in the worker's threads), ``AsyncHandlerContext`` for coroutines."""

from __future__ import annotations

import psycopg

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol, TypeVar, Unpack, cast

from . import _protocol as p
from ._drivers import Statements
from ._handler_orchestration import HandlerOrchestration, check_human_wait, check_key, check_timeout, child_request, child_requests
from .errors import JobSleeping, LeaseLostError
from .types import ChildJobSpec, ChildOutcome, DependencyOutcome, HumanDecision, JobOptions, JsonValue
from ._limits import HANDLER
from .validation import check_datetime, check_param_text, check_text, check_whole_number, to_json_text

T = TypeVar("T")


@dataclass
class ClaimedJob:
    """What the worker knows about a job it claimed."""

    job_id: str
    queue: str
    type: str
    attempt: int
    max_attempts: int
    fence: int
    worker_id: str
    #: Checkpoints stored by earlier runs: name -> [] (stored None from another SDK) or [value].
    checkpoints: dict[str, list[JsonValue]]
    #: Wake times of durable sleeps reached by earlier runs (the claim's ``waits`` column: sleeps,
    #: never signal or human waits).
    sleeps: dict[str, datetime]


class AbortSignal:
    """Fires once, with a reason: ``JobCanceledError``, ``LeaseLostError``,
    ``ExecutionTimeoutError``, ``WorkerShutdownError`` or ``JobSleeping``. Thread-safe to read
    and wait on; the worker fires it from its event loop."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._waiters: list[asyncio.Future[None]] = []
        self.reason: BaseException | None = None

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    def raise_if_aborted(self) -> None:
        """Raises the reason if the signal fired."""
        if self.reason is not None:
            raise self.reason

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks the calling thread until the signal fires (True) or ``timeout`` seconds pass."""
        return self._event.wait(timeout)

    async def wait_async(self) -> None:
        """Waits (in the worker's event loop) until the signal fires."""
        if self.aborted:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        await future

    def abort(self, reason: BaseException) -> None:
        if self.aborted:
            return
        self.reason = reason
        self._event.set()
        for future in self._waiters:
            if not future.done():
                future.set_result(None)
        self._waiters.clear()


class RunningWorker(Protocol):
    """What a context asks of the worker that runs its job."""

    def lost(self, job_id: str) -> None: ...

    def slept(self, job_id: str, wake_at: datetime) -> None: ...

    def parked(self, job_id: str, reason: BaseException) -> None: ...


def _check_name(name: object) -> str:
    # (A wait's or a sleep's name: its length is the SQL function's to check.)
    return check_param_text(name, "name")


def _check_checkpoint_name(name: object) -> str:
    # (Checked before the operation runs, which save_checkpoint_v2 would refuse to store.)
    length = HANDLER["nameLength"]
    return check_text(name, "name", length["max"], length["min"])


class _JobCalls:
    """The protocol calls of one running job, shared by both contexts (they run in the worker's
    event loop)."""

    def __init__(self, job: ClaimedJob, worker: RunningWorker, statements: Statements, signal: AbortSignal) -> None:
        self.job = job
        self.worker = worker
        self.statements = statements
        self.signal = signal

    def lost(self) -> LeaseLostError:
        """The database said this worker no longer owns the job: tells the worker, returns the error."""
        self.worker.lost(self.job.job_id)
        return LeaseLostError(self.job.job_id)

    async def save_checkpoint(self, name: str, text: str) -> Any:
        """Saves ``text`` under ``name`` and returns the value now stored: this one, or on
        ``exists`` the one another save stored first (a checkpoint answers what is stored)."""
        rows = await self.statements.rows(p.CHECKPOINT_SQL, (self.job.job_id, self.job.worker_id, self.job.fence, name, text))
        status, stored = rows[0]
        if status == "stale" or stored is None:
            raise self.lost()
        entry = p.parse_json(stored)
        self.job.checkpoints[name] = entry
        return entry[0] if entry else None

    async def set_progress(self, text: str) -> None:
        rows = await self.statements.rows(p.PROGRESS_SQL, (self.job.job_id, self.job.worker_id, self.job.fence, text))
        if p.status_of(rows) == "stale":
            raise self.lost()

    async def sleep(self, name: str, until: datetime | None, ms: int | None) -> None:
        known = self.job.sleeps.get(name)
        if known is not None and known <= datetime.now(timezone.utc):
            return
        self.signal.raise_if_aborted()
        params = (self.job.job_id, self.job.worker_id, self.job.fence, name, until, ms)
        status, wake_at = (await self.statements.rows(p.SLEEP_SQL, params))[0]
        if status == "stale":
            raise self.lost()
        self.job.sleeps[name] = wake_at
        if status == "elapsed":
            return
        # `sleeping` or `canceled`: either way the job is no longer this worker's to run.
        self.worker.slept(self.job.job_id, wake_at)
        raise JobSleeping(self.job.job_id, wake_at)


def _replay(job: ClaimedJob, name: str) -> tuple[bool, Any]:
    stored = job.checkpoints.get(name)
    if stored is None:
        return False, None
    return True, stored[0] if stored else None


def _check_sleep(name: object, ms: object) -> tuple[str, int]:
    # (The range is sleep_v1's to check.)
    return _check_name(name), check_whole_number(ms, "ms", HANDLER["sleepMs"])


def _progress_text(value: object) -> str:
    return to_json_text(value, "progress", 65536)


class _ContextBase:
    def __init__(self, calls: _JobCalls) -> None:
        job = calls.job
        self._calls = calls
        #: The job's id.
        self.job_id = job.job_id
        #: This attempt's number, from 1.
        self.attempt = job.attempt
        self.max_attempts = job.max_attempts
        self.queue = job.queue
        self.type = job.type
        self.worker_id = job.worker_id
        #: Fires when the job is canceled, the lease is lost, the attempt times out or the worker shuts down.
        self.signal = calls.signal
        self._orchestration = HandlerOrchestration(calls)
        #: A transactional handler's connection (set while it runs).
        self._conn: Any = None


class AsyncHandlerContext(_ContextBase):
    """The context of an ``async def`` handler.

    Example::

        @worker.handler("order.fulfill")
        async def fulfill(payload, ctx: AsyncHandlerContext):
            charge = await ctx.checkpoint("charge", lambda: payments.charge(payload["orderId"]))
            return {"chargeId": charge["chargeId"], "attempt": ctx.attempt}
    """

    async def checkpoint(self, name: str, operation: Callable[[], T | Awaitable[T]]) -> T:
        """Runs ``operation`` once per job (it may return a value or an awaitable): its result
        (JSON, at most 1 MiB) is stored under ``name``, and when the handler runs again (after
        a crash, a retry or a durable sleep) the stored result is returned instead. Raises
        ``LeaseLostError`` if this worker no longer owns the job."""
        _check_checkpoint_name(name)
        found, value = _replay(self._calls.job, name)
        if found:
            return cast(T, value)
        self.signal.raise_if_aborted()
        result = operation()
        if inspect.isawaitable(result):
            result = await result
        text = to_json_text(result, f"checkpoint {name!r}")
        if self._conn is not None:
            from ._transactional import save_checkpoint_async

            return cast(T, await save_checkpoint_async(self._conn, self._calls.job, name, text))
        stored = await self._calls.save_checkpoint(name, text)
        return cast(T, stored)

    @property
    def conn(self) -> Any:
        """In a transactional handler (``worker.handle(type, fn, transactional=True)``): the
        connection (Psycopg ``AsyncConnection`` or asyncpg) of the transaction that also records
        the job's success. Write through it and the writes commit exactly when the job
        succeeds. None for other handlers."""
        return self._conn

    async def set_progress(self, value: JsonValue) -> None:
        """Records progress (any JSON, at most 64 KiB), visible as ``progress`` of the job's
        snapshot and kept when the job ends."""
        await self._calls.set_progress(_progress_text(value))

    async def sleep(self, name: str, ms: int) -> None:
        """A durable sleep of ``ms`` from the first time the job reached the sleep named
        ``name``: the job is set aside without holding a slot or consuming an attempt, and the
        handler runs again from the top when it wakes (checkpoints replay, this sleep returns at
        once). Returns at once when the wake time has passed; otherwise raises ``JobSleeping``,
        which the handler must let through."""
        checked, delay = _check_sleep(name, ms)
        await self._calls.sleep(checked, None, delay)

    async def sleep_until(self, name: str, until: datetime) -> None:
        """Like ``sleep``, until a point in time (timezone-aware)."""
        await self._calls.sleep(_check_name(name), check_datetime(until, "until"), None)

    async def dependencies(self) -> list[DependencyOutcome]:
        """The prerequisites this job was enqueued with (``depends_on``), in that order, each
        with its state and its result or error envelope (a job with policy ``run`` sees which
        of them failed)."""
        return await self._orchestration.dependencies()

    async def run_child(self, key: str, type: str, payload: Any, **options: Unpack[JobOptions]) -> Any:
        """Starts a child job and waits for it without holding a worker slot: the child is
        enqueued and this job parks ``blocked`` in one transaction, and ``JobBlocked`` unwinds
        the handler (let it through). When the child ends, the handler runs again from the top
        and this call returns the child's result, or raises ``ChildJobFailedError`` (catchable)
        if it failed or was canceled. ``key`` names the call: a replay finds the child it
        started; another type or payload under the same key raises ``ChildJobConflictError``."""
        checked = check_key(key)
        return await self._orchestration.run_child(checked, child_request(type, payload, dict(options)))

    async def run_children(self, key: str, children: Sequence[ChildJobSpec]) -> list[ChildOutcome]:
        """Starts 1 to 1000 child jobs (dicts with ``type``, ``payload`` and enqueue options) and
        waits for all of them as ``run_child`` does; returns every child's outcome in the order
        given, whether it succeeded or not."""
        checked = check_key(key)
        return await self._orchestration.run_children(checked, child_requests(children))

    async def wait_for_signal(self, name: str, *, timeout_ms: int | None = None) -> Any:
        """Waits for the signal ``name`` that ``queue.send_signal(job_id, name, payload)`` sends
        and returns its payload. A signal sent before the wait was reached is kept and returned
        at once. Meanwhile the job parks (``blocked``, or ``scheduled`` until the timeout)
        without holding a slot or consuming an attempt, and this call raises ``JobWaiting``
        (let it through); the handler runs again from the top when the signal arrives. The n-th
        wait for a name in a run takes the n-th signal of that name. After ``timeout_ms``
        (counted from the first time the wait is reached) it raises ``SignalTimeoutError``."""
        checked, timeout = _check_name(name), check_timeout(timeout_ms)
        return await self._orchestration.wait_for_signal(checked, timeout)

    async def wait_for_human(
        self,
        name: str,
        *,
        context: JsonValue = None,
        choices: Sequence[str] | None = None,
        timeout_ms: int | None = None,
    ) -> HumanDecision:
        """Waits for a person's decision on ``name`` and returns it (decision, actor, reason,
        decided_at). The wait opens the first time it is reached, with ``context`` (listed by
        ``admin.list_human_waits``) and ``choices``; ``queue.complete_human_wait`` records the
        decision and wakes the job. Meanwhile the job parks as for ``wait_for_signal``. After
        ``timeout_ms`` it raises ``HumanWaitTimeoutError``."""
        checked = _check_name(name)
        return await self._orchestration.wait_for_human(checked, *check_human_wait(context, choices, timeout_ms))


class HandlerContext(_ContextBase):
    """The context of a plain (sync) handler, which runs in one of the worker's threads.

    Example::

        @worker.handler("order.fulfill")
        def fulfill(payload, ctx: HandlerContext):
            charge = ctx.checkpoint("charge", lambda: payments.charge(payload["orderId"]))
            return {"chargeId": charge["chargeId"], "attempt": ctx.attempt}
    """

    def __init__(self, calls: _JobCalls, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(calls)
        self._loop = loop

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def checkpoint(self, name: str, operation: Callable[[], T]) -> T:
        """Runs ``operation`` once per job; see ``AsyncHandlerContext.checkpoint``."""
        _check_checkpoint_name(name)
        found, value = _replay(self._calls.job, name)
        if found:
            return cast(T, value)
        self.signal.raise_if_aborted()
        result = operation()
        text = to_json_text(result, f"checkpoint {name!r}")
        if self._conn is not None:
            from ._transactional import save_checkpoint_sync

            return cast(T, save_checkpoint_sync(self._conn, self._calls.job, name, text))
        stored = self._call(self._calls.save_checkpoint(name, text))
        return cast(T, stored)

    @property
    def conn(self) -> psycopg.Connection[Any] | None:
        """In a transactional handler (``worker.handle(type, fn, transactional=True)``): the
        connection of the transaction that also records the job's success (from the
        application's pool). Write through it and the writes commit exactly when the job
        succeeds. None for other handlers."""
        return cast("psycopg.Connection[Any] | None", self._conn)

    def set_progress(self, value: JsonValue) -> None:
        """Records progress; see ``AsyncHandlerContext.set_progress``."""
        self._call(self._calls.set_progress(_progress_text(value)))

    def sleep(self, name: str, ms: int) -> None:
        """A durable sleep; see ``AsyncHandlerContext.sleep``."""
        checked, delay = _check_sleep(name, ms)
        self._call(self._calls.sleep(checked, None, delay))

    def sleep_until(self, name: str, until: datetime) -> None:
        """Like ``sleep``, until a point in time (timezone-aware)."""
        self._call(self._calls.sleep(_check_name(name), check_datetime(until, "until"), None))

    def dependencies(self) -> list[DependencyOutcome]:
        """The prerequisites' outcomes; see ``AsyncHandlerContext.dependencies``."""
        return self._call(self._orchestration.dependencies())

    def run_child(self, key: str, type: str, payload: Any, **options: Unpack[JobOptions]) -> Any:
        """Starts a child job and waits for it; see ``AsyncHandlerContext.run_child``."""
        checked = check_key(key)
        return self._call(self._orchestration.run_child(checked, child_request(type, payload, dict(options))))

    def run_children(self, key: str, children: Sequence[ChildJobSpec]) -> list[ChildOutcome]:
        """Starts child jobs and waits for all of them; see ``AsyncHandlerContext.run_children``."""
        checked = check_key(key)
        return self._call(self._orchestration.run_children(checked, child_requests(children)))

    def wait_for_signal(self, name: str, *, timeout_ms: int | None = None) -> Any:
        """Waits for a signal; see ``AsyncHandlerContext.wait_for_signal``."""
        checked, timeout = _check_name(name), check_timeout(timeout_ms)
        return self._call(self._orchestration.wait_for_signal(checked, timeout))

    def wait_for_human(
        self,
        name: str,
        *,
        context: JsonValue = None,
        choices: Sequence[str] | None = None,
        timeout_ms: int | None = None,
    ) -> HumanDecision:
        """Waits for a person's decision; see ``AsyncHandlerContext.wait_for_human``."""
        checked = _check_name(name)
        return self._call(self._orchestration.wait_for_human(checked, *check_human_wait(context, choices, timeout_ms)))


def wake_times(sleeps: dict[str, str] | None) -> dict[str, datetime]:
    """The sleeps of a claim (its ``waits`` column, ISO text from jsonb) as datetimes."""
    return {name: datetime.fromisoformat(at) for name, at in (sleeps or {}).items()}


