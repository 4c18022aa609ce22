"""OpenTelemetry spans of enqueues and attempts, as the TypeScript client records them
(lib/core/telemetry/job-tracing.ts; docs/operations.md#tracing): a PRODUCER span ``send
<queue>`` per enqueue statement under the caller's active span, whose W3C context is stored
with the jobs, and a CONSUMER span ``process <queue>`` per attempt, the root of a trace of its
own linked to that context. OpenTelemetry is optional (the ``workhorse[otel]`` extra): without
it, or without an SDK's tracer provider, ``active()`` is None and nothing else here runs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Link, NoOpTracerProvider, ProxyTracerProvider, Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

    from ._trace_context import inject_trace_context, span_context_of
    from .context import ClaimedJob

#: Whether OpenTelemetry's API is loaded here (see ``_loaded``).
_LOADED = False

#: The instrumentation scope of every span: the project's name, as the TypeScript and Go clients
#: name theirs, so one filter finds every language's spans.
TRACER_NAME = "nestjs-workhorse"
#: ``messaging.system`` of every span (OpenTelemetry's messaging semantic conventions).
MESSAGING_SYSTEM = "workhorse"

_cached: tuple[TracerProvider, JobTracing] | None = None


def _loaded() -> bool:
    """Loads OpenTelemetry's API here once the application has loaded it. Until then no SDK can
    have set a tracer provider, and no span can be active (both go through
    ``opentelemetry.trace``): there is nothing to trace, and a process that has the package but
    does not use it skips the import (about 12 ms and its memory)."""
    global _LOADED, otel_context, trace, Link, NoOpTracerProvider, ProxyTracerProvider, SpanKind, Status, StatusCode
    global inject_trace_context, span_context_of
    if _LOADED:
        return True
    if sys.modules.get("opentelemetry.trace") is None:
        return False
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Link, NoOpTracerProvider, ProxyTracerProvider, SpanKind, Status, StatusCode

    from ._trace_context import inject_trace_context, span_context_of

    _LOADED = True
    return True


def active() -> JobTracing | None:
    """The tracing of the application's OpenTelemetry SDK, or None when OpenTelemetry is not
    installed or loaded, or no SDK registered a tracer provider: callers then skip tracing
    entirely. The other functions here are called only with a span this tracing made."""
    global _cached
    if not _loaded():
        return None
    provider = trace.get_tracer_provider()
    # The API's own providers until an SDK's is set: their spans would record nothing.
    if isinstance(provider, (ProxyTracerProvider, NoOpTracerProvider)):
        return None
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    tracing = JobTracing(provider.get_tracer(TRACER_NAME, __version__))
    _cached = (provider, tracing)
    return tracing


def start_send(requests: Sequence[dict[str, Any]]) -> SendSpan:
    """The PRODUCER span of an enqueue statement sending ``requests`` (the protocol's wire
    requests, which get the span's ``traceContext``), or ``UNTRACED`` when nothing is traced."""
    tracing = active()
    send = None if tracing is None else tracing.start_send(requests)
    return UNTRACED if send is None else send


class SendSpan:
    """The PRODUCER span of one enqueue statement (one job or a batch), or none (``UNTRACED``).
    It wraps the statement: ``with start_send(requests) as send: ids = run(); send.sent(ids)``;
    a raise inside marks it failed."""

    def __init__(self, span: Span | None) -> None:
        self._span = span

    def __enter__(self) -> SendSpan:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: object) -> None:
        if error is not None and self._span is not None:
            record_error(self._span, error)
            self._span.end()

    def sent(self, ids: Sequence[str | None]) -> None:
        """The statement returned these job ids."""
        if self._span is None:
            return
        if len(ids) == 1 and ids[0] is not None:
            self._span.set_attribute("messaging.message.id", ids[0])
        self._span.end()


#: The enqueue of a caller outside any span, or of a process without an SDK: nothing recorded.
UNTRACED = SendSpan(None)


class JobTracing:
    """Starts the spans of enqueues and of attempts."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def start_send(self, requests: Sequence[dict[str, Any]]) -> SendSpan | None:
        """A PRODUCER span ``send <queue>``, child of the caller's active span, whose context is
        added to each request as ``traceContext``; None when the caller has no active span
        (tracing follows the caller's trace, it does not start one per enqueue)."""
        parent = otel_context.get_current()
        if not trace.get_current_span(parent).get_span_context().is_valid:
            return None
        queue = _common(requests, lambda r: r.get("queue", "default"))
        type = _common(requests, lambda r: r["type"])
        attributes: dict[str, AttributeValue] = {
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
        }
        if queue is not None:
            attributes["messaging.destination.name"] = queue
        if type is not None:
            attributes["workhorse.job.type"] = type
        if len(requests) > 1:
            attributes["messaging.batch.message_count"] = len(requests)
        name = "send" if queue is None else f"send {queue}"
        span = self._tracer.start_span(name, context=parent, kind=SpanKind.PRODUCER, attributes=attributes)
        carried = inject_trace_context(trace.set_span_in_context(span, parent))
        if carried is not None:
            for request in requests:
                request["traceContext"] = carried
        return SendSpan(span)

    def start_attempt(self, job: ClaimedJob, stored: str | None) -> Span:
        """The CONSUMER span ``process <queue>`` of one attempt: the root of a trace of its own,
        linked to the span that enqueued the job (``stored``, the claim's ``trace_context``)."""
        enqueuer = span_context_of(stored)
        return self._tracer.start_span(
            f"process {job.queue}",
            context=otel_context.Context(),
            kind=SpanKind.CONSUMER,
            links=None if enqueuer is None else [Link(enqueuer)],
            attributes={
                "messaging.system": MESSAGING_SYSTEM,
                "messaging.operation.name": "process",
                "messaging.operation.type": "process",
                "messaging.destination.name": job.queue,
                "messaging.message.id": job.job_id,
                "workhorse.job.type": job.type,
                "workhorse.job.attempt": job.attempt,
            },
        )


def call_in_span(span: Span, fn: Callable[..., Any], payload: Any, ctx: Any) -> Any:
    """Calls a plain handler (in a worker thread) with ``span`` active, so the spans and
    enqueues inside belong to it."""
    token = otel_context.attach(trace.set_span_in_context(span, otel_context.Context()))
    try:
        return fn(payload, ctx)
    finally:
        otel_context.detach(token)


async def await_in_span(span: Span, fn: Callable[..., Coroutine[Any, Any, Any]], payload: Any, ctx: Any) -> Any:
    """Awaits a coroutine handler with ``span`` active (in the handler's own task)."""
    token = otel_context.attach(trace.set_span_in_context(span, otel_context.Context()))
    try:
        return await fn(payload, ctx)
    finally:
        otel_context.detach(token)


def record_error(span: Span, error: BaseException) -> None:
    """Marks ``span`` as failed with ``error`` (an exception event, ``error.type`` and status
    ERROR with its message). A handler may raise an exception whose ``str()`` or ``repr()``
    raises: the span then says only that the attempt failed, and the failure is still recorded."""
    try:
        span.record_exception(error)
        span.set_attribute("error.type", type(error).__name__)
        span.set_status(Status(StatusCode.ERROR, str(error)))
    except Exception:
        span.set_status(Status(StatusCode.ERROR))


def set_outcome(span: Span, outcome: str) -> None:
    """How the attempt ended (once its span has ended, e.g. abandoned at shutdown, nothing changes)."""
    if span.is_recording():
        span.set_attribute("workhorse.job.outcome", outcome)


def _common(requests: Sequence[dict[str, Any]], of: Callable[[dict[str, Any]], str]) -> str | None:
    """The value every request has for ``of``, or None when they differ."""
    first = of(requests[0])
    return first if all(of(r) == first for r in requests) else None
