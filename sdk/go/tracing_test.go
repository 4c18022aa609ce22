package workhorse_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

var w3cPropagator sync.Once

// newTracing is an OpenTelemetry SDK tracer provider that exports to memory, shut down when the
// test ends. The global propagator is the W3C one, as an application's would be (the global
// tracer provider stays unset: each test hands its provider over itself).
func newTracing(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	w3cPropagator.Do(func() { otel.SetTextMapPropagator(propagation.TraceContext{}) })
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	return provider, exporter
}

// storedTraceContext is the trace_context column of a job, nil when it has none.
func storedTraceContext(t *testing.T, db *testpg.DB, jobID string) map[string]string {
	t.Helper()
	var stored map[string]string
	if err := db.Pool.QueryRow(context.Background(), "SELECT trace_context FROM workhorse.job WHERE id = $1", jobID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	return stored
}

func traceparentOf(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// attributesOf maps a span's attributes by key to their values as strings.
func attributesOf(span tracetest.SpanStub) map[string]string {
	out := map[string]string{}
	for _, kv := range span.Attributes {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// spanFor waits until the exporter holds an ended span with that name and attribute value.
func spanFor(t *testing.T, exporter *tracetest.InMemoryExporter, name string, key attribute.Key, value string) tracetest.SpanStub {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, span := range exporter.GetSpans() {
			if span.Name == name && attributesOf(span)[string(key)] == value {
				return span
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no span %q with %s=%s; spans: %d", name, key, value, len(exporter.GetSpans()))
	return tracetest.SpanStub{}
}

func wantAttributes(t *testing.T, span tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := attributesOf(span)
	for key, value := range want {
		if got[key] != value {
			t.Errorf("span %q: %s = %q, want %q (all: %v)", span.Name, key, got[key], value, got)
		}
	}
}

func TestAnEnqueueUnderASpanRecordsAProducerSpanAndStoresItsContext(t *testing.T) {
	db := testpg.New(t)
	provider, exporter := newTracing(t)
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	ctx, checkout := provider.Tracer("shop").Start(context.Background(), "checkout")

	id, err := queue.Enqueue(ctx, "email.send", map[string]string{"to": "a@example.com"}, &workhorse.EnqueueOptions{Queue: "mail"})
	must(t, err)
	send := spanFor(t, exporter, "send mail", "messaging.message.id", id)
	if send.SpanKind != trace.SpanKindProducer || send.Parent.SpanID() != checkout.SpanContext().SpanID() || send.SpanContext.TraceID() != checkout.SpanContext().TraceID() {
		t.Errorf("the send span is %v, child of %v; want a PRODUCER child of checkout %v", send.SpanKind, send.Parent.SpanID(), checkout.SpanContext().SpanID())
	}
	wantAttributes(t, send, map[string]string{
		"messaging.system": "workhorse", "messaging.operation.name": "send", "messaging.operation.type": "send",
		"messaging.destination.name": "mail", "workhorse.job.type": "email.send",
	})
	if got := storedTraceContext(t, db, id); got["traceparent"] != traceparentOf(send.SpanContext) || len(got) != 1 {
		t.Errorf("the job stores %v, want the send span's traceparent %s", got, traceparentOf(send.SpanContext))
	}

	// A batch shares one span: its queue when all go to one, no type when they differ.
	ids, err := queue.EnqueueMany(ctx, []workhorse.EnqueueRequest{{Type: "a", Payload: 1}, {Type: "b", Payload: 2}})
	must(t, err)
	batch := spanFor(t, exporter, "send default", "messaging.batch.message_count", "2")
	if _, hasType := attributesOf(batch)["workhorse.job.type"]; hasType {
		t.Errorf("a batch of two types names one: %v", attributesOf(batch))
	}
	for _, id := range ids {
		if got := storedTraceContext(t, db, id)["traceparent"]; got != traceparentOf(batch.SpanContext) {
			t.Errorf("batch job %s stores %q, want %s", id, got, traceparentOf(batch.SpanContext))
		}
	}
	mixed, err := queue.EnqueueMany(ctx, []workhorse.EnqueueRequest{{Type: "a", Payload: 1, EnqueueOptions: workhorse.EnqueueOptions{Queue: "q1"}}, {Type: "a", Payload: 2}})
	must(t, err)
	spanFor(t, exporter, "send", "workhorse.job.type", "a")
	if storedTraceContext(t, db, mixed[1]) == nil {
		t.Error("the second job of a batch to two queues stores no trace context")
	}

	// The tracestate of the caller's trace goes with the traceparent.
	state, err := trace.ParseTraceState("vendor=value")
	must(t, err)
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true})
	inbound, request := provider.Tracer("shop").Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "request")
	withState, err := queue.Enqueue(inbound, "email.send", nil, nil)
	must(t, err)
	request.End()
	if got := storedTraceContext(t, db, withState); got["tracestate"] != "vendor=value" {
		t.Errorf("the job stores %v, want tracestate vendor=value", got)
	}

	// A refused statement ends its span as failed; nothing was enqueued.
	_, err = queue.Enqueue(ctx, "email.send", nil, &workhorse.EnqueueOptions{Queue: "refused", DependsOn: []workhorse.Prerequisite{workhorse.DependOnJob("00000000-0000-4000-8000-000000000000")}})
	if err == nil {
		t.Fatal("an unknown prerequisite was accepted")
	}
	refused := spanFor(t, exporter, "send refused", "messaging.operation.name", "send")
	if refused.Status.Code != codes.Error || attributesOf(refused)["error.type"] == "" {
		t.Errorf("the refused enqueue's span has status %v and attributes %v", refused.Status, attributesOf(refused))
	}
	checkout.End()
}

func TestEachAttemptRunsInAConsumerSpanLinkedToItsEnqueue(t *testing.T) {
	db := testpg.New(t)
	provider, exporter := newTracing(t)
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	w := newWorker(t, db, workhorse.WorkerOptions{Queues: []string{"traced", "children"}, TracerProvider: provider})
	var handlerSpan sync.Map // job id -> the span context its handler's ctx carried
	var followUpID sync.Map
	must(t, workhorse.Handle(w, "order.fulfill", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) {
		handlerSpan.Store(job.ID, trace.SpanContextFromContext(ctx))
		id, err := queue.Enqueue(ctx, "email.send", nil, &workhorse.EnqueueOptions{Queue: "children"})
		followUpID.Store(job.ID, id)
		return "done", err
	}))
	must(t, workhorse.Handle(w, "email.send", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) { return nil, nil }))
	must(t, workhorse.Handle(w, "payment.charge", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) {
		if job.Attempt == 1 {
			return nil, workhorse.RetryAfter(workhorse.NewError("GatewayBusy", "try again"), 0)
		}
		return nil, workhorse.NewError("PaymentDeclined", "card ending 4242 was declined")
	}))
	must(t, workhorse.Handle(w, "order.ship", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) {
		return workhorse.RunChild[string](ctx, job, "label", "label.print", nil, &workhorse.EnqueueOptions{Queue: "children"})
	}))
	must(t, workhorse.Handle(w, "label.print", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) { return "label", nil }))

	ctx, checkout := provider.Tracer("shop").Start(context.Background(), "checkout")
	fulfill, err := queue.Enqueue(ctx, "order.fulfill", nil, &workhorse.EnqueueOptions{Queue: "traced"})
	must(t, err)
	charge, err := queue.Enqueue(ctx, "payment.charge", nil, &workhorse.EnqueueOptions{Queue: "traced", MaxAttempts: 2})
	must(t, err)
	ship, err := queue.Enqueue(ctx, "order.ship", nil, &workhorse.EnqueueOptions{Queue: "traced"})
	must(t, err)
	checkout.End()
	startWorker(t, w)

	// Succeeded: a root CONSUMER span of a trace of its own, linked to the send span.
	send := spanFor(t, exporter, "send traced", "messaging.message.id", fulfill)
	process := spanFor(t, exporter, "process traced", "messaging.message.id", fulfill)
	if process.SpanKind != trace.SpanKindConsumer || process.Parent.IsValid() || process.SpanContext.TraceID() == send.SpanContext.TraceID() {
		t.Errorf("the attempt's span is %v with parent %v in trace %s; want a root CONSUMER span of a new trace", process.SpanKind, process.Parent, process.SpanContext.TraceID())
	}
	if len(process.Links) != 1 || !process.Links[0].SpanContext.Equal(send.SpanContext.WithRemote(true)) {
		t.Errorf("the attempt's span links to %v, want the send span %v", process.Links, send.SpanContext)
	}
	wantAttributes(t, process, map[string]string{
		"messaging.system": "workhorse", "messaging.operation.name": "process", "messaging.operation.type": "process",
		"messaging.destination.name": "traced", "workhorse.job.type": "order.fulfill", "workhorse.job.attempt": "1",
		"workhorse.job.outcome": "succeeded",
	})
	if seen, _ := handlerSpan.Load(fulfill); !seen.(trace.SpanContext).Equal(process.SpanContext) {
		t.Errorf("the handler's ctx carried span %v, want the attempt's %v", seen, process.SpanContext)
	}
	// A job enqueued by the handler points back at the attempt.
	followUp, _ := followUpID.Load(fulfill)
	inner := spanFor(t, exporter, "send children", "messaging.message.id", followUp.(string))
	if inner.Parent.SpanID() != process.SpanContext.SpanID() {
		t.Errorf("the handler's enqueue is a child of %v, want the attempt's span", inner.Parent.SpanID())
	}
	if got := storedTraceContext(t, db, followUp.(string))["traceparent"]; got != traceparentOf(inner.SpanContext) {
		t.Errorf("the handler's job stores %q, want %s", got, traceparentOf(inner.SpanContext))
	}
	followUpRun := spanFor(t, exporter, "process children", "messaging.message.id", followUp.(string))
	if len(followUpRun.Links) != 1 || followUpRun.Links[0].SpanContext.SpanID() != inner.SpanContext.SpanID() {
		t.Errorf("the handler's job's attempt links to %v, want %v", followUpRun.Links, inner.SpanContext.SpanID())
	}

	// Failed: retried once (retry_scheduled), then failed for good; each attempt records its error.
	waitForState(t, admin, charge, 15*time.Second, workhorse.StateFailed)
	for attempt, want := range map[string][2]string{"1": {"retry_scheduled", "GatewayBusy"}, "2": {"failed", "PaymentDeclined"}} {
		var span tracetest.SpanStub
		for _, s := range exporter.GetSpans() {
			if attributesOf(s)["messaging.message.id"] == charge && attributesOf(s)["workhorse.job.attempt"] == attempt {
				span = s
			}
		}
		wantAttributes(t, span, map[string]string{"workhorse.job.outcome": want[0], "error.type": want[1]})
		if span.Status.Code != codes.Error || len(span.Events) == 0 || span.Events[0].Name != "exception" {
			t.Errorf("attempt %s: status %v, events %v; want ERROR and an exception event", attempt, span.Status, span.Events)
		}
		if len(span.Links) != 1 {
			t.Errorf("attempt %s links to %v, want its enqueue", attempt, span.Links)
		}
	}

	// A parent that runs a child job parks; the child stores the context of the send span that
	// the parent's attempt started.
	waitForState(t, admin, ship, 15*time.Second, workhorse.StateSucceeded)
	var parked, replayed int
	for _, s := range exporter.GetSpans() {
		if attributesOf(s)["messaging.message.id"] == ship && s.Name == "process traced" {
			switch attributesOf(s)["workhorse.job.outcome"] {
			case "parked":
				parked++
			case "succeeded":
				replayed++
			}
		}
	}
	if parked != 1 || replayed != 1 {
		t.Errorf("the parent's runs: %d parked and %d succeeded, want 1 and 1", parked, replayed)
	}
	label := spanFor(t, exporter, "process children", "workhorse.job.type", "label.print")
	children := spanFor(t, exporter, "send children", "workhorse.job.type", "label.print")
	if len(label.Links) != 1 || label.Links[0].SpanContext.SpanID() != children.SpanContext.SpanID() {
		t.Errorf("the child's attempt links to %v, want the RunChild send span %v", label.Links, children.SpanContext.SpanID())
	}
}

func TestWithoutATracerProviderNothingIsRecordedOrStored(t *testing.T) {
	db := testpg.New(t)
	newTracing(t) // the W3C propagator, and no tracer provider anywhere
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	// A caller inside a trace (an incoming request's context) whose spans nobody records.
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx, span := otel.Tracer("shop").Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "checkout")
	defer span.End()
	id, err := queue.Enqueue(ctx, "email.send", nil, nil)
	must(t, err)
	ids, err := queue.EnqueueMany(ctx, []workhorse.EnqueueRequest{{Type: "email.send"}, {Type: "email.send"}})
	must(t, err)
	for _, id := range append(ids, id) {
		if got := storedTraceContext(t, db, id); got != nil {
			t.Errorf("job %s stores %v without a tracer provider", id, got)
		}
	}
	w := newWorker(t, db, workhorse.WorkerOptions{})
	var recording sync.Map
	must(t, workhorse.Handle(w, "email.send", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) {
		recording.Store(job.ID, trace.SpanFromContext(ctx).IsRecording() || trace.SpanContextFromContext(ctx).IsValid())
		return nil, nil
	}))
	startWorker(t, w)
	for _, id := range append(ids, id) {
		waitForState(t, admin, id, 15*time.Second, workhorse.StateSucceeded)
		if traced, _ := recording.Load(id); traced != false {
			t.Errorf("job %s ran with a span in its context", id)
		}
	}
}

func TestAMalformedTraceContextFromAnotherWriterDoesNotBreakTheWorker(t *testing.T) {
	db := testpg.New(t)
	provider, exporter := newTracing(t)
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	valid := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	stored := map[string]string{ // what another writer stored -> the link the attempt gets
		`"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`: "",
		`[1, 2]`:                   "",
		`{"traceparent": 5}`:       "",
		`{"traceparent": "00-zz"}`: "",
		`{"traceparent": "00-00000000000000000000000000000000-b7ad6b7169203331-01"}`: "",
		`{"traceparent": "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`: "",
		`{"traceparent": "` + valid + `", "tracestate": 7}`:                          valid,
		`{"traceparent": "` + valid + `", "tracestate": "not a = valid, list"}`:      valid,
	}
	jobs := map[string]string{}
	for value, link := range stored {
		id, err := queue.Enqueue(context.Background(), "noop", nil, nil)
		must(t, err)
		if _, err := db.Pool.Exec(context.Background(), "UPDATE workhorse.job SET trace_context = $2::jsonb WHERE id = $1", id, value); err != nil {
			t.Fatal(err)
		}
		jobs[id] = link
	}
	w := newWorker(t, db, workhorse.WorkerOptions{TracerProvider: provider})
	must(t, workhorse.Handle(w, "noop", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) { return nil, nil }))
	startWorker(t, w)
	for id, link := range jobs {
		waitForState(t, admin, id, 15*time.Second, workhorse.StateSucceeded)
		span := spanFor(t, exporter, "process default", "messaging.message.id", id)
		var got string
		if len(span.Links) == 1 {
			got = traceparentOf(span.Links[0].SpanContext)
		}
		if got != link || len(span.Links) > 1 {
			var value json.RawMessage
			_ = db.Pool.QueryRow(context.Background(), "SELECT trace_context FROM workhorse.job WHERE id = $1", id).Scan(&value)
			t.Errorf("stored %s: the attempt links to %v, want %q", value, span.Links, link)
		}
	}
}

func TestTheGlobalTracerProviderTracesAWorkerStartedAfterItIsInstalled(t *testing.T) {
	db := testpg.New(t)
	provider, exporter := newTracing(t)
	otel.SetTracerProvider(provider)
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	ctx, checkout := otel.Tracer("shop").Start(context.Background(), "checkout")
	id, err := queue.Enqueue(ctx, "noop", nil, nil)
	must(t, err)
	checkout.End()
	w := newWorker(t, db, workhorse.WorkerOptions{})
	must(t, workhorse.Handle(w, "noop", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) { return nil, nil }))
	startWorker(t, w)
	send := spanFor(t, exporter, "send default", "messaging.message.id", id)
	process := spanFor(t, exporter, "process default", "messaging.message.id", id)
	if len(process.Links) != 1 || process.Links[0].SpanContext.SpanID() != send.SpanContext.SpanID() {
		t.Errorf("the attempt links to %v, want %v", process.Links, send.SpanContext.SpanID())
	}
}
