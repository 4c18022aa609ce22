package workhorse

import (
	"context"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName is the instrumentation scope of every span, the TypeScript client's too.
const tracerName = "nestjs-workhorse"

// messagingSystem is `messaging.system` of every span.
var messagingSystem = semconv.MessagingSystemKey.String("workhorse")

// The attributes of this project's own (docs/operations.md#tracing).
const (
	jobTypeKey    = attribute.Key("workhorse.job.type")
	jobAttemptKey = attribute.Key("workhorse.job.attempt")
	jobOutcomeKey = attribute.Key("workhorse.job.outcome")
)

// tracedSend is what the PRODUCER span of one enqueue statement (one job, a batch, or the
// children of RunChildren) says about its jobs, and where each request's JSON object ends in
// the statement's body (its trace context is added there). nil when the enqueue is not traced.
type tracedSend struct {
	queue, jobType        string
	mixedQueue, mixedType bool
	ends                  []int
}

// traceSend is a tracedSend when ctx carries a recording span, else nil: tracing follows the
// caller's trace, it does not start one per enqueue. Without a tracer provider no span
// records, and this is one context lookup.
func traceSend(ctx context.Context) *tracedSend {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return nil
	}
	return &tracedSend{}
}

// add notes one request of the statement, whose JSON object ends at end in its body.
func (s *tracedSend) add(queue, jobType string, end int) {
	if s == nil {
		return
	}
	if queue == "" {
		queue = "default"
	}
	if len(s.ends) == 0 {
		s.queue, s.jobType = queue, jobType
	} else {
		s.mixedQueue = s.mixedQueue || queue != s.queue
		s.mixedType = s.mixedType || jobType != s.jobType
	}
	s.ends = append(s.ends, end)
}

// start records the PRODUCER span `send <queue>`, child of ctx's span, with the tracer of that
// span's provider; it returns ctx with the span, the span, and body with the span's trace
// context (as the global propagator writes it) added to each request.
func (s *tracedSend) start(ctx context.Context, body []byte) (context.Context, trace.Span, []byte) {
	attributes := []attribute.KeyValue{messagingSystem, semconv.MessagingOperationNameKey.String("send"), semconv.MessagingOperationTypeSend}
	name := "send"
	if !s.mixedQueue {
		name += " " + s.queue
		attributes = append(attributes, semconv.MessagingDestinationNameKey.String(s.queue))
	}
	if !s.mixedType {
		attributes = append(attributes, jobTypeKey.String(s.jobType))
	}
	if len(s.ends) > 1 {
		attributes = append(attributes, semconv.MessagingBatchMessageCountKey.Int(len(s.ends)))
	}
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(tracerName, trace.WithInstrumentationVersion(SDKVersion))
	ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attributes...))
	traceContext := traceContextJSON(ctx)
	if traceContext == nil {
		return ctx, span, body
	}
	out := make([]byte, 0, len(body)+len(s.ends)*(len(traceContext)+len(`,"traceContext":`)))
	start := 0
	for _, end := range s.ends {
		out = append(out, body[start:end-1]...) // the object without its closing brace
		out = append(out, `,"traceContext":`...)
		out = append(out, traceContext...)
		out = append(out, '}')
		start = end
	}
	return ctx, span, append(out, body[start:]...)
}

// endSend ends an enqueue's span: the statement returned ids, or failed with err (nothing was
// enqueued).
func endSend(span trace.Span, ids []string, err error) {
	if err != nil {
		recordFailure(span, err)
	} else if len(ids) == 1 {
		span.SetAttributes(semconv.MessagingMessageIDKey.String(ids[0]))
	}
	span.End()
}

// attemptTracer is the tracer of a worker's attempt spans, from provider (WorkerOptions.
// TracerProvider) or else the global one once the application installed one
// (otel.SetTracerProvider); nil otherwise, and the worker then skips tracing: one nil check per
// job, no span, no context.
func attemptTracer(provider trace.TracerProvider) trace.Tracer {
	if provider == nil {
		provider = otel.GetTracerProvider()
		// Until an application installs one, the global provider is the API's own stand-in, of
		// its internal package; it only forwards to a provider installed later.
		if t := reflect.TypeOf(provider); t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global" {
			return nil
		}
	}
	if _, none := provider.(noop.TracerProvider); none {
		return nil
	}
	return provider.Tracer(tracerName, trace.WithInstrumentationVersion(SDKVersion))
}

// startAttempt starts the CONSUMER span `process <queue>` of one attempt: the root of a trace of
// its own, linked to the span that enqueued the job when its stored trace context names one.
// It returns ctx with the span, for the handler.
func startAttempt(ctx context.Context, tracer trace.Tracer, job *Job, storedTraceContext []byte) (context.Context, trace.Span) {
	options := []trace.SpanStartOption{
		trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			messagingSystem,
			semconv.MessagingOperationNameKey.String("process"),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingDestinationNameKey.String(job.Queue),
			semconv.MessagingMessageIDKey.String(job.ID),
			jobTypeKey.String(job.Type),
			jobAttemptKey.Int(job.Attempt),
		),
	}
	if enqueuer := storedSpanContext(storedTraceContext); enqueuer.IsValid() {
		options = append(options, trace.WithLinks(trace.Link{SpanContext: enqueuer}))
	}
	return tracer.Start(ctx, "process "+job.Queue, options...)
}

// span is the attempt's CONSUMER span, which the handler's ctx carries (and which ends when
// the run is finished); nil when the worker does not trace. (Not a field of the run: a run is
// made for every job, and one more word would be paid for without tracing too.)
func (r *run) span() trace.Span {
	if r.job.w.tracer == nil {
		return nil
	}
	return trace.SpanFromContext(r.ctx)
}

// traceOutcome sets the attempt span's `workhorse.job.outcome` (the last one set counts).
func (r *run) traceOutcome(outcome string) {
	if span := r.span(); span != nil {
		span.SetAttributes(jobOutcomeKey.String(outcome))
	}
}

// recordFailure marks span as failed with err: an exception event, `error.type` (the name the
// error's envelope gets) and status ERROR with its message.
func recordFailure(span trace.Span, err error) {
	span.RecordError(err)
	span.SetAttributes(semconv.ErrorTypeKey.String(ToErrorEnvelope(err).Name))
	span.SetStatus(codes.Error, err.Error())
}
