package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverArgs are the arguments of River's no-op job.
type riverArgs struct {
	I int `json:"i"`
}

func (riverArgs) Kind() string { return "noop" }

func riverLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// riverMigrate runs River's migrations up, as `river migrate-up` does (the CLI's module is not
// served by the Go module proxy; rivermigrate is the package it calls).
func riverMigrate(ctx context.Context, pool *pgxpool.Pool) error {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: riverLogger()})
	if err != nil {
		return err
	}
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

func riverClient(pool *pgxpool.Pool, config *river.Config) (*river.Client[pgx.Tx], error) {
	config.Logger = riverLogger()
	return river.NewClient(riverpgxv5.New(pool), config)
}

// riverPreload inserts count no-op jobs, 1,000 per InsertManyFast (COPY).
func riverPreload(ctx context.Context, pool *pgxpool.Pool, count int) error {
	client, err := riverClient(pool, &river.Config{})
	if err != nil {
		return err
	}
	for from := 0; from < count; from += 1000 {
		params := make([]river.InsertManyParams, 0, 1000)
		for i := from; i < min(count, from+1000); i++ {
			params = append(params, river.InsertManyParams{Args: riverArgs{I: i}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return err
		}
	}
	return nil
}

// riverWorker is a River client with MaxWorkers = concurrency on the default queue and a no-op
// worker; River's defaults otherwise (FetchCooldown 100 ms, FetchPollInterval 1 s) unless the
// options set fetchCooldownMs and fetchPollIntervalMs (its own benchmark uses 2 and 20).
func riverWorker(ctx context.Context, pool *pgxpool.Pool, concurrency int, options map[string]int, handled func()) (func() error, error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[riverArgs]) error {
		handled()
		return nil
	}))
	client, err := riverClient(pool, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: concurrency}},
		Workers:           workers,
		FetchCooldown:     time.Duration(options["fetchCooldownMs"]) * time.Millisecond,
		FetchPollInterval: time.Duration(options["fetchPollIntervalMs"]) * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	return func() error { return client.Stop(ctx) }, nil
}

// inserter is the producer's River client (one, made on the first batch).
var inserter *river.Client[pgx.Tx]

// riverEnqueue is InsertMany of one batch (it returns the inserted jobs, as our EnqueueMany
// returns their ids).
func riverEnqueue(ctx context.Context, pool *pgxpool.Pool, jobs []noop) error {
	if inserter == nil {
		client, err := riverClient(pool, &river.Config{})
		if err != nil {
			return err
		}
		inserter = client
	}
	params := make([]river.InsertManyParams, len(jobs))
	for i, job := range jobs {
		params[i] = river.InsertManyParams{Args: riverArgs{I: job.I}}
	}
	_, err := inserter.InsertMany(ctx, params)
	return err
}
