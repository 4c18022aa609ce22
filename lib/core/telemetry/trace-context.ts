import { createTraceState, propagation, type Context, type SpanContext } from '@opentelemetry/api';

/**
 * A job's stored trace context: the W3C `traceparent` (and `tracestate`, when there is one) of
 * the span that enqueued it. The protocol's `traceContext` enqueue key and the claim's
 * `trace_context` column (docs/protocol.md).
 */
export interface TraceContext {
  traceparent: string;
  tracestate?: string;
}

// The shapes `workhorse.is_valid_trace_context` accepts (sql/030_enqueue.sql).
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const TRACESTATE = /^[\x20-\x7e]{1,512}$/;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

/**
 * The trace context of `context`'s span as the application's propagator writes it (the W3C
 * propagator writes `traceparent`), or null when it writes none the protocol accepts: no
 * propagator registered, another format, or a malformed value. Telemetry never fails an
 * enqueue, so a value the database would refuse is dropped here.
 */
export function injectTraceContext(context: Context): TraceContext | null {
  const carrier: Record<string, string> = {};
  propagation.inject(context, carrier);
  const { traceparent, tracestate } = carrier;
  if (typeof traceparent !== 'string' || spanContextOf({ traceparent }) === null) return null;
  return typeof tracestate === 'string' && TRACESTATE.test(tracestate) ? { traceparent, tracestate } : { traceparent };
}

/**
 * The span context a stored trace context names (remote), or null for a value that is not one.
 * Read here rather than through the worker's propagator: the column's format is the protocol's
 * (W3C), whatever propagators the worker's process registered.
 */
export function spanContextOf(stored: TraceContext | null): SpanContext | null {
  if (stored === null || typeof stored.traceparent !== 'string') return null;
  const parts = TRACEPARENT.exec(stored.traceparent);
  if (parts === null || parts[1] === ZERO_TRACE_ID || parts[2] === ZERO_SPAN_ID) return null;
  const spanContext: SpanContext = { traceId: parts[1], spanId: parts[2], traceFlags: Number.parseInt(parts[3], 16), isRemote: true };
  if (typeof stored.tracestate === 'string' && TRACESTATE.test(stored.tracestate)) spanContext.traceState = createTraceState(stored.tracestate);
  return spanContext;
}
