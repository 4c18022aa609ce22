package workhorse

import (
	"context"
	"encoding/json"
	"regexp"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The shapes workhorse.is_valid_trace_context accepts (sql/030_enqueue.sql): a traceparent of
// version 00, a tracestate of 1 to 512 printable ASCII characters.
var (
	traceparentShape = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)
	tracestateShape  = regexp.MustCompile(`^[\x20-\x7e]{1,512}$`)
)

// wireTraceContext is a job's stored trace context: the protocol's `traceContext` enqueue key
// and the claim's `trace_context` column (docs/protocol.md).
type wireTraceContext struct {
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// traceContextJSON is the JSON object text of ctx's span context as the application's global
// propagator writes it (the W3C propagator writes `traceparent`), or nil when it writes none
// the protocol accepts: no propagator installed, another format, or a malformed value.
// Telemetry never fails an enqueue, so a value the database would refuse is dropped here.
func traceContextJSON(ctx context.Context) []byte {
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	stored := wireTraceContext{Traceparent: carrier["traceparent"], Tracestate: carrier["tracestate"]}
	if !remoteSpanContext(stored).IsValid() {
		return nil
	}
	if !tracestateShape.MatchString(stored.Tracestate) {
		stored.Tracestate = ""
	}
	data, _ := json.Marshal(stored)
	return data
}

// storedSpanContext is the span context (remote) that a claimed job's trace_context names, or
// an invalid one for anything else: none, or a value another writer stored that is not one.
// It is read as the protocol's format (W3C), whatever propagator this process installed.
func storedSpanContext(column []byte) trace.SpanContext {
	if len(column) == 0 {
		return trace.SpanContext{}
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(column, &fields) != nil {
		return trace.SpanContext{}
	}
	var stored wireTraceContext
	if json.Unmarshal(fields["traceparent"], &stored.Traceparent) != nil {
		return trace.SpanContext{}
	}
	if json.Unmarshal(fields["tracestate"], &stored.Tracestate) != nil {
		stored.Tracestate = ""
	}
	return remoteSpanContext(stored)
}

// remoteSpanContext parses a stored trace context with the W3C propagator of OpenTelemetry,
// after checking the protocol's shape (which also refuses the versions after 00 that the
// propagator would accept). An invalid span context means it names none.
func remoteSpanContext(stored wireTraceContext) trace.SpanContext {
	if !traceparentShape.MatchString(stored.Traceparent) {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{"traceparent": stored.Traceparent}
	if tracestateShape.MatchString(stored.Tracestate) {
		carrier["tracestate"] = stored.Tracestate
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}
