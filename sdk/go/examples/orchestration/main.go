// Orchestration: a report waits for two extracts, an order runs a child job and waits for a
// warehouse's signal, without holding a worker slot while it waits.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

type Shipment struct {
	TrackingID string `json:"trackingId"`
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

	// Two extracts, then a report that needs both: one batch, the report names them by index.
	ids, err := queue.EnqueueMany(ctx, []workhorse.EnqueueRequest{
		{Type: "extract", Payload: "sales"},
		{Type: "extract", Payload: "stock"},
		{Type: "report", Payload: "2026-12-01", EnqueueOptions: workhorse.EnqueueOptions{
			DependsOn:          []workhorse.Prerequisite{workhorse.DependOnRequest(0), workhorse.DependOnRequest(1)},
			OnDependencyFailed: workhorse.DependencyRun,
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	order, err := queue.Enqueue(ctx, "order.ship", "o-1", nil)
	if err != nil {
		log.Fatal(err)
	}

	// This one stops once the report and the order are done (a service runs until SIGTERM).
	runCtx, stop := context.WithCancel(ctx)
	var mu sync.Mutex
	done := map[string]bool{}
	worker, err := workhorse.NewWorker(workhorse.Pgx(pool), workhorse.WorkerOptions{
		OnEvent: func(e workhorse.Event) {
			// The order parked on its signal: the warehouse answers (in its own transaction, if it likes).
			if e.Name == workhorse.EventJobBlocked && e.JobID == order && e.WaitingFor == "signal" {
				go func() {
					if _, err := queue.SendSignal(ctx, order, "shipped", Shipment{TrackingID: "T-1"}, nil); err != nil {
						log.Print(err)
					}
				}()
			}
			if e.Name == workhorse.EventJobSucceeded {
				mu.Lock()
				done[e.JobID] = true
				if done[order] && done[ids[2]] {
					stop()
				}
				mu.Unlock()
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	must(workhorse.Handle(worker, "extract", func(ctx context.Context, job *workhorse.Job, what string) (string, error) {
		return what + ": 42 rows", nil
	}))
	must(workhorse.Handle(worker, "report", func(ctx context.Context, job *workhorse.Job, day string) ([]string, error) {
		// Every prerequisite has ended: its state, and its result or error envelope.
		inputs, err := job.Dependencies(ctx)
		lines := []string{}
		for _, d := range inputs {
			lines = append(lines, string(d.State)+" "+string(d.Result))
		}
		return lines, err
	}))
	must(workhorse.Handle(worker, "label.print", func(ctx context.Context, job *workhorse.Job, orderID string) (string, error) {
		return "label for " + orderID, nil
	}))
	must(workhorse.Handle(worker, "order.ship", func(ctx context.Context, job *workhorse.Job, orderID string) (string, error) {
		// Parks the order until the child ends; the handler then runs again from the top, and
		// RunChild returns the child's result. Return what these calls return: a
		// *JobBlockedError must reach the worker.
		label, err := workhorse.RunChild[string](ctx, job, "label", "label.print", orderID, nil)
		if err != nil {
			return "", err
		}
		shipment, err := workhorse.WaitForSignal[Shipment](ctx, job, "shipped", nil)
		if err != nil {
			return "", err
		}
		return label + ", tracking " + shipment.TrackingID, nil
	}))
	if err := worker.Run(runCtx); err != nil {
		log.Fatal(err)
	}

	report, err := admin.GetJob(ctx, ids[2])
	if err != nil {
		log.Fatal(err)
	}
	shipped, err := admin.GetJob(ctx, order)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(report.State, len(report.Dependencies), string(report.Result))
	fmt.Println(shipped.State, shipped.CurrentAttempt, len(shipped.Children), string(shipped.Result))
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
