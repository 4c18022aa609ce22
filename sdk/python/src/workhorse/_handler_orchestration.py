"""What a handler waits for, as owner calls of the protocol (lib/core/handler-waits.ts and
child-jobs.ts in TypeScript): child jobs (``run_children_v1``), signals (``wait_signal_v1``),
human decisions (``wait_human_v1``), and the outcomes of its prerequisites
(``dependencies_v2``). Each call carries the claim's worker id and fence token; when the job
parks, the worker lets go of it and the call raises ``JobBlocked`` / ``JobWaiting``, which the
handler must let through. Shared by the sync and async contexts (runs in the worker's loop)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from . import _protocol as p
from ._job_tracing import SendSpan, start_send
from .errors import (
    ChildJobFailedError,
    HumanWaitTimeoutError,
    JobBlocked,
    JobCanceledError,
    JobWaiting,
    SignalTimeoutError,
    WorkhorseValidationError,
)
from .types import ChildOutcome, DependencyOutcome, HumanDecision
from ._limits import HANDLER
from .validation import (
    ENQUEUE_OPTIONS,
    check_param_text,
    check_whole_number,
    renamed_request_error,
    to_json_text,
    to_wire_children,
    to_wire_request,
)

if TYPE_CHECKING:
    from .context import _JobCalls



def check_timeout(value: object) -> int | None:
    # (The range is check_wait_timeout's, in SQL.)
    return None if value is None else check_whole_number(value, "timeoutMs", HANDLER["waitTimeoutMs"])


def check_human_wait(context: object, choices: object, timeout_ms: object) -> tuple[str | None, str | None, int | None]:
    """A human wait's context and choices as JSON text (or None), and its timeout."""
    context_text = None if context is None else to_json_text(context, "context")
    # (How many choices, how long and whether distinct is wait_human_v1's to check.)
    choices_text = None
    if choices is not None:
        as_list = list(choices) if isinstance(choices, (list, tuple)) else choices
        choices_text = to_json_text(as_list, "choices")
    return context_text, choices_text, check_timeout(timeout_ms)


@dataclass(frozen=True)
class ChildRequests:
    """The checked child jobs of a ``run_child(ren)`` call (the requests ``run_children_v1``
    receives) and, under an OpenTelemetry span, the call's PRODUCER span (whose context the
    requests carry). Made in the handler's thread or task, where its span is the active one."""

    wire: list[dict[str, Any]]
    span: SendSpan
    #: How run_children_v1's field names (``requests[i].``) read to the caller: ``""`` for
    #: ``run_child`` (``priority``), ``"children"`` for ``run_children`` (``children[i].priority``).
    prefix: str = "children"


def child_request(type: object, payload: object, options: dict[str, Any]) -> ChildRequests:
    """One child job (``run_child``)."""
    for key in ("depends_on", "on_dependency_failed", "on_dependency_canceled"):
        if key in options:
            raise WorkhorseValidationError(ENQUEUE_OPTIONS[key], "is not an option of a child job")
    return _checked([to_wire_request(type, payload, options)], "")


def check_key(key: object) -> str:
    # (Its length is run_children_v1's to check.)
    return check_param_text(key, "key")


def child_requests(children: object) -> ChildRequests:
    """The child jobs of ``run_children``."""
    return _checked(to_wire_children(children))


def _checked(wire: list[dict[str, Any]], prefix: str = "children") -> ChildRequests:
    return ChildRequests(wire, start_send(wire), prefix)


class HandlerOrchestration:
    """The orchestration calls of one run of a handler."""

    def __init__(self, calls: _JobCalls) -> None:
        self._calls = calls
        #: How many waits for each signal name this run reached (the n-th is wait n on every replay).
        self._signal_waits: dict[str, int] = {}

    async def _call(self, sql: str, *values: Any) -> Sequence[p.Row]:
        calls = self._calls
        calls.signal.raise_if_aborted()
        rows = await calls.statements.rows(sql, (calls.job.job_id, calls.job.worker_id, calls.job.fence, *values))
        if rows[0][0] == "stale":
            raise calls.lost()
        return rows

    def _parked(self, status: str, reason: BaseException) -> BaseException:
        """The job parked (or ended by a pending cancel): the worker lets go of it."""
        job_id = self._calls.job.job_id
        told = JobCanceledError(job_id) if status == "canceled" else reason
        self._calls.worker.parked(job_id, told)
        return told

    async def dependencies(self) -> list[DependencyOutcome]:
        calls = self._calls
        rows = await calls.statements.rows(p.DEPENDENCIES_SQL, (calls.job.job_id, calls.job.worker_id, calls.job.fence))
        return [DependencyOutcome(r[0], r[1], p.parse_json(r[2]), p.parse_json(r[3])) for r in rows]

    async def run_children(self, key: str, requests: ChildRequests) -> list[ChildOutcome]:
        text = json.dumps(requests.wire, ensure_ascii=False, separators=(",", ":"))
        with requests.span as send:
            try:
                rows = await self._call(p.RUN_CHILDREN_SQL, key, text)
            except WorkhorseValidationError as error:
                raise renamed_request_error(error, requests.prefix) from None
            send.sent([r[1] for r in rows if r[1] is not None])
        status = rows[0][0]
        if status != "settled":
            raise self._parked(status, JobBlocked(self._calls.job.job_id))
        return [ChildOutcome(r[1], r[2], p.parse_json(r[3]), p.parse_json(r[4])) for r in rows]

    async def run_child(self, key: str, request: ChildRequests) -> Any:
        outcome = (await self.run_children(key, request))[0]
        if outcome.state != "succeeded":
            raise ChildJobFailedError(outcome.job_id, outcome.state, cast(dict[str, Any], outcome.error or {}))
        return outcome.result

    async def wait_for_signal(self, name: str, timeout_ms: int | None) -> Any:
        seq = self._signal_waits.get(name, 0) + 1
        self._signal_waits[name] = seq
        status, payload, timeout_at = (await self._call(p.WAIT_SIGNAL_SQL, name, seq, timeout_ms))[0]
        if status == "delivered":
            return p.parse_json(payload)
        job_id = self._calls.job.job_id
        if status == "timed_out":
            raise SignalTimeoutError(job_id, name, cast(datetime, timeout_at))
        raise self._parked(status, JobWaiting(job_id, "signal", name, timeout_at))

    async def wait_for_human(self, name: str, context: str | None, choices: str | None, timeout_ms: int | None) -> HumanDecision:
        row = (await self._call(p.WAIT_HUMAN_SQL, name, context, choices, timeout_ms))[0]
        status, decision, actor, reason, decided_at, timeout_at = row
        if status == "decided":
            return HumanDecision(p.parse_json(decision), actor, reason, decided_at)
        job_id = self._calls.job.job_id
        if status == "timed_out":
            raise HumanWaitTimeoutError(job_id, name, cast(datetime, timeout_at))
        raise self._parked(status, JobWaiting(job_id, "human", name, timeout_at))
