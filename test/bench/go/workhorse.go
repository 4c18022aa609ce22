package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// workhorseWorker is the Go SDK's worker with its defaults (LISTEN on, poll 1 s, lease 30 s)
// and a no-op handler; options may set roundTrips.
func workhorseWorker(ctx context.Context, pool *pgxpool.Pool, concurrency int, options map[string]int, handled func()) (func() error, error) {
	errors := make(chan error, 1)
	w, err := workhorse.NewWorker(workhorse.Pgx(pool), workhorse.WorkerOptions{
		Concurrency: concurrency,
		RoundTrips:  options["roundTrips"],
		OnEvent: func(e workhorse.Event) {
			if e.Name == workhorse.EventWorkerError {
				select {
				case errors <- fmt.Errorf("%s: %w", e.During, e.Err):
				default:
				}
			}
		},
	})
	if err != nil {
		return nil, err
	}
	err = workhorse.Handle(w, "noop", func(context.Context, *workhorse.Job, noop) (any, error) {
		handled()
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	return func() error {
		cancel()
		if err := <-done; err != nil {
			return err
		}
		select {
		case err := <-errors:
			return fmt.Errorf("worker error: %w", err)
		default:
			return nil
		}
	}, nil
}

// queue is the producer's Queue (one, so its schema check runs once).
var queue *workhorse.Queue

// workhorseEnqueue is Queue.EnqueueMany of one batch.
func workhorseEnqueue(ctx context.Context, pool *pgxpool.Pool, jobs []noop) error {
	if queue == nil {
		queue = workhorse.NewQueue(workhorse.Pgx(pool))
	}
	requests := make([]workhorse.EnqueueRequest, len(jobs))
	for i, job := range jobs {
		requests[i] = workhorse.EnqueueRequest{Type: "noop", Payload: job}
	}
	_, err := queue.EnqueueMany(ctx, requests)
	return err
}
