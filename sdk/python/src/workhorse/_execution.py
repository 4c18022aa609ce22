"""One job a worker runs, as the worker's parts share it: the handler registered for its type,
the run's record (its claim, signal, lease deadline, how it ended) and a completion waiting for
the next round trip."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .context import AbortSignal, ClaimedJob
from .types import RetryPolicy

if TYPE_CHECKING:
    from opentelemetry.trace import Span

#: Why a run ended other than by its handler's return or raise; `parked`: the job slept or parked
#: (children, a signal, a human decision) and the worker let go of it.
Outcome = Literal["lost", "canceled", "abandoned", "timeout", "parked"]


@dataclass(frozen=True)
class Handler:
    fn: Callable[..., Any]
    is_async: bool
    retry: RetryPolicy | None
    #: A typed job's payload decoder (``JobDefinition.decode``): raises ``PayloadDecodeError``.
    decode: Callable[[str, Any], Any] | None = None
    #: A transactional handler's pool (the application's): its writes and completion commit together.
    transaction_pool: Any = None


@dataclass(eq=False)
class Run:
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
    #: The attempt's CONSUMER span, with an OpenTelemetry SDK (ended when the run is finished).
    span: Span | None = None

    @property
    def lease(self) -> tuple[str, int]:
        return self.job.job_id, self.job.fence


@dataclass(eq=False)
class Completion:
    run: Run
    result: str
    #: Sent alone: a batch it was in was refused, and the culprit must be found.
    alone: bool = False


def abort(run: Run, reason: BaseException) -> None:
    """Fires the run's signal; a coroutine handler is cancelled as well (a thread can only be
    told, through ``ctx.signal``)."""
    run.signal.abort(reason)
    if run.task is not None and isinstance(run.task, asyncio.Task) and not run.task.done():
        run.task.cancel()
