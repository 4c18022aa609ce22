package workhorse_test

import (
	"context"
	"sync/atomic"
	"testing"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkDrain drains b.N no-op jobs with one worker at concurrency 10: ns/op and allocs/op
// are per job, for the whole process (pgx's allocations included), to compare a change of the
// hot path against the commit before it (run with -benchtime=5000x; the speed that counts is
// the benchmark's, docs/benchmarks). "untraced" has no tracer provider; "traced" records every
// attempt's span with an SDK provider (and a discarding exporter).
func BenchmarkDrain(b *testing.B) {
	b.Run("untraced", func(b *testing.B) { benchmarkDrain(b, workhorse.WorkerOptions{}) })
	b.Run("traced", func(b *testing.B) {
		provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
		defer func() { _ = provider.Shutdown(context.Background()) }()
		benchmarkDrain(b, workhorse.WorkerOptions{TracerProvider: provider})
	})
}

func benchmarkDrain(b *testing.B, o workhorse.WorkerOptions) {
	db := testpg.New(b)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	for from := 0; from < b.N; from += 1000 {
		batch := make([]workhorse.EnqueueRequest, min(1000, b.N-from))
		for i := range batch {
			batch[i] = workhorse.EnqueueRequest{Type: "noop", Payload: from + i}
		}
		if _, err := queue.EnqueueMany(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	w, err := workhorse.NewWorker(workhorse.Pgx(db.Pool), o)
	if err != nil {
		b.Fatal(err)
	}
	var handled atomic.Int64
	drained := make(chan struct{})
	if err := workhorse.Handle(w, "noop", func(ctx context.Context, job *workhorse.Job, _ int) (any, error) {
		if handled.Add(1) == int64(b.N) {
			close(drained)
		}
		return nil, nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-drained
	b.StopTimer()
	if err := w.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
