// sqlc: the queries sqlc generates and the job they need commit in one transaction, or neither
// does. The generated code runs on a DBTX; workhorse.Pgx takes the same transaction.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/examples/sqlc/store"
)

type ChargeOrder struct {
	OrderID string `json:"orderId"`
}

func (ChargeOrder) Kind() string { return "order.charge" }

// placeOrder writes the order through the generated queries and enqueues its charge, in tx.
func placeOrder(ctx context.Context, tx pgx.Tx, id string, cents int64) error {
	order, err := store.New(tx).CreateOrder(ctx, store.CreateOrderParams{ID: id, TotalCents: cents})
	if err != nil {
		return err
	}
	_, err = workhorse.EnqueueArgs(ctx, workhorse.NewQueue(workhorse.Pgx(tx)), ChargeOrder{OrderID: order.ID}, nil)
	return err
}

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS shop_order (id text PRIMARY KEY, total_cents bigint NOT NULL)"); err != nil {
		log.Fatal(err)
	}

	// Committed: the order and its job.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return placeOrder(ctx, tx, "o-1", 4200) })
	if err != nil {
		log.Fatal(err)
	}
	// Rolled back after both were written: neither stays.
	errDeclined := errors.New("declined by the fraud check")
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := placeOrder(ctx, tx, "o-2", 99900); err != nil {
			return err
		}
		return errDeclined
	})
	if !errors.Is(err, errDeclined) {
		log.Fatal(err)
	}

	orders, err := store.New(pool).CountOrders(ctx)
	if err != nil {
		log.Fatal(err)
	}
	jobs, err := workhorse.NewAdmin(workhorse.Pgx(pool)).ListJobs(ctx, workhorse.ListJobsFilter{Type: ChargeOrder{}.Kind()})
	if err != nil {
		log.Fatal(err)
	}
	charge, err := workhorse.DecodeArgs[ChargeOrder](&jobs.Items[0])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(orders, "order,", len(jobs.Items), "job:", charge.OrderID, jobs.Items[0].State)
}
