// Tracing: a job enqueued under a span runs in a span of its own, linked to the enqueue.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

type Email struct {
	To string `json:"to"`
}

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// The application's OpenTelemetry SDK (it exports to its tracing backend; this one keeps
	// the spans in memory to print them) and the W3C propagator.
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer provider.Shutdown(ctx)
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tracer := otel.Tracer("shop")

	// Enqueued under the request's span: the job stores the trace context of its send span.
	request, span := tracer.Start(ctx, "checkout")
	jobID, err := workhorse.NewQueue(workhorse.Pgx(pool)).Enqueue(request, "email.send", Email{To: "a@example.com"}, nil)
	span.End()
	if err != nil {
		log.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	worker, err := workhorse.NewWorker(workhorse.Pgx(pool), workhorse.WorkerOptions{
		OnEvent: func(e workhorse.Event) {
			if e.Name == workhorse.EventJobSucceeded && e.JobID == jobID {
				stop()
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	err = workhorse.Handle(worker, "email.send", func(ctx context.Context, job *workhorse.Job, email Email) (any, error) {
		_, span := tracer.Start(ctx, "smtp") // the handler's spans belong to the attempt's
		defer span.End()
		return nil, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Run(runCtx); err != nil {
		log.Fatal(err)
	}

	names := map[trace.SpanID]string{}
	for _, s := range exporter.GetSpans() {
		names[s.SpanContext.SpanID()] = s.Name
	}
	for _, s := range exporter.GetSpans() {
		line := s.Name + " (" + s.SpanKind.String() + ")"
		if s.Parent.IsValid() {
			line += ", child of " + names[s.Parent.SpanID()]
		}
		for _, link := range s.Links {
			line += ", linked to " + names[link.SpanContext.SpanID()]
		}
		fmt.Println(line)
	}
}
