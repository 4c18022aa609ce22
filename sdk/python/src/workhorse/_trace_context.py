"""A job's stored trace context: the W3C ``traceparent`` (and ``tracestate``, when there is one)
of the span that enqueued it, as the protocol's ``traceContext`` enqueue key and the claim's
``trace_context`` column hold it (docs/protocol.md; lib/core/telemetry/trace-context.ts in
TypeScript). Only imported with OpenTelemetry installed."""

from __future__ import annotations

import json
import re

from opentelemetry import propagate
from opentelemetry.context import Context
from opentelemetry.trace import SpanContext, TraceFlags, TraceState

# The shapes `workhorse.is_valid_trace_context` accepts (sql/030_enqueue.sql).
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_TRACESTATE = re.compile(r"[\x20-\x7e]{1,512}")
_ZERO_TRACE_ID = "0" * 32
_ZERO_SPAN_ID = "0" * 16


def inject_trace_context(context: Context) -> dict[str, str] | None:
    """The trace context of ``context``'s span as the application's propagator writes it (the
    W3C propagator, OpenTelemetry's default, writes ``traceparent``), or None when it writes none
    the protocol accepts: another format, or a malformed value. Telemetry never fails an enqueue,
    so a value the database would refuse is dropped here."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    traceparent, tracestate = carrier.get("traceparent"), carrier.get("tracestate")
    if not isinstance(traceparent, str) or _parts(traceparent) is None:
        return None
    if isinstance(tracestate, str) and _TRACESTATE.fullmatch(tracestate):
        return {"traceparent": traceparent, "tracestate": tracestate}
    return {"traceparent": traceparent}


def span_context_of(stored: str | None) -> SpanContext | None:
    """The (remote) span context a stored trace context (the column's JSON text) names, or None
    for a value that is not one. Read here rather than through the worker's propagator: the
    column's format is the protocol's (W3C), whatever propagators the process configured."""
    if stored is None:
        return None
    try:
        value = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("traceparent"), str):
        return None
    parts = _parts(value["traceparent"])
    if parts is None:
        return None
    trace_id, span_id, flags = parts
    tracestate = value.get("tracestate")
    state = None
    if isinstance(tracestate, str) and _TRACESTATE.fullmatch(tracestate):
        state = TraceState.from_header([tracestate])
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags), trace_state=state)


def _parts(traceparent: str) -> tuple[int, int, int] | None:
    match = _TRACEPARENT.fullmatch(traceparent)
    if match is None or match[1] == _ZERO_TRACE_ID or match[2] == _ZERO_SPAN_ID:
        return None
    return int(match[1], 16), int(match[2], 16), int(match[3], 16)
