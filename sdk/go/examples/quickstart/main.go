// Quickstart: enqueue a job in your own transaction, run it in a worker, read what happened.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

type Order struct {
	ID string `json:"id"`
}

type Receipt struct {
	ChargeID string `json:"chargeId"`
}

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	queue := workhorse.NewQueue(workhorse.Pgx(pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(pool))

	// The order and its job commit together, or neither does.
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", "o-1"); err != nil {
		log.Fatal(err)
	}
	jobID, err := queue.With(workhorse.Pgx(tx)).Enqueue(ctx, "order.fulfill", Order{ID: "o-1"}, &workhorse.EnqueueOptions{Queue: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	// A service runs its worker until SIGTERM (signal.NotifyContext); this one stops once the
	// job is done.
	runCtx, stop := context.WithCancel(ctx)
	worker, err := workhorse.NewWorker(workhorse.Pgx(pool), workhorse.WorkerOptions{
		Queues: []string{"orders"},
		OnEvent: func(e workhorse.Event) {
			if e.Name == workhorse.EventJobSucceeded && e.JobID == jobID {
				stop()
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	err = workhorse.Handle(worker, "order.fulfill", func(ctx context.Context, job *workhorse.Job, order Order) (Receipt, error) {
		// Runs once per job: after a crash, the next attempt gets the stored result instead.
		chargeID, err := workhorse.Checkpoint(ctx, job, "charge", func(ctx context.Context) (string, error) {
			return "ch_" + order.ID, nil // call the payment provider here, with an idempotency key
		})
		return Receipt{ChargeID: chargeID}, err
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Run(runCtx); err != nil {
		log.Fatal(err)
	}

	job, err := admin.GetJob(ctx, jobID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, job.CurrentAttempt, string(job.Result))
}
