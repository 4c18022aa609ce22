package workhorse_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

type booking struct {
	Invoice string `json:"invoice"`
	Amount  int    `json:"amount"`
	Fail    bool   `json:"fail"`
}

// ledger lists the ledger's rows as "invoice:amount".
func ledger(t *testing.T, db *testpg.DB) string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), "SELECT invoice || ':' || amount FROM ledger ORDER BY invoice")
	must(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		must(t, rows.Scan(&s))
		out = append(out, s)
	}
	return join(out)
}

// A transactional handler's writes, the jobs it enqueues and its checkpoints commit with the
// job's success, and none of them stays when the attempt fails; on pgx and on database/sql.
func TestATransactionalHandlersWritesCommitWithItsCompletion(t *testing.T) {
	for _, driver := range []string{"pgx", "database/sql"} {
		t.Run(driver, func(t *testing.T) {
			db := testpg.New(t)
			ctx := context.Background()
			_, err := db.Pool.Exec(ctx, "CREATE TABLE ledger (invoice text PRIMARY KEY, amount int NOT NULL)")
			must(t, err)
			pool := workhorse.Pgx(db.Pool)
			if driver == "database/sql" {
				sqldb, err := sql.Open("pgx", db.URL)
				must(t, err)
				t.Cleanup(func() { _ = sqldb.Close() })
				pool = workhorse.SQL(sqldb)
			}
			w, err := workhorse.NewWorker(pool, workhorse.WorkerOptions{Poll: 50 * time.Millisecond, Tick: 100 * time.Millisecond})
			must(t, err)
			must(t, workhorse.HandleTx(w, "invoice.book", func(ctx context.Context, job *workhorse.Job, tx *workhorse.HandlerTx, b booking) (int, error) {
				insert := "INSERT INTO ledger (invoice, amount) VALUES ($1, $2)"
				if tx.Pgx() != nil {
					_, err = tx.Pgx().Exec(ctx, insert, b.Invoice, b.Amount)
				} else {
					_, err = tx.SQL().ExecContext(ctx, insert, b.Invoice, b.Amount)
				}
				if err != nil {
					return 0, err
				}
				if _, err := workhorse.Checkpoint(ctx, job, "booked", func(context.Context) (string, error) { return b.Invoice, nil }); err != nil {
					return 0, err
				}
				// Progress commits on its own: the checkpoint in the transaction holds no lock it waits for.
				if err := job.SetProgress(ctx, "booked"); err != nil {
					return 0, err
				}
				if _, err := workhorse.NewQueue(tx.DB()).Enqueue(ctx, "invoice.mail", b.Invoice, nil); err != nil {
					return 0, err
				}
				if b.Fail {
					return 0, workhorse.NonRetryable(errors.New("the bank refused"))
				}
				return b.Amount, nil
			}))
			startWorker(t, w)
			queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
			admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
			ok, err := queue.Enqueue(ctx, "invoice.book", booking{Invoice: "i-1", Amount: 10}, nil)
			must(t, err)
			failing, err := queue.Enqueue(ctx, "invoice.book", booking{Invoice: "i-2", Amount: 20, Fail: true}, nil)
			must(t, err)
			if job := waitForState(t, admin, ok, 20*time.Second, workhorse.StateSucceeded, workhorse.StateFailed); job.State != workhorse.StateSucceeded || !sameJSON(job.Result, "10") {
				t.Fatalf("the booking: %+v %+v", job, job.Error)
			}
			if job := waitForState(t, admin, failing, 20*time.Second, workhorse.StateSucceeded, workhorse.StateFailed); job.State != workhorse.StateFailed || job.Error.Message != "the bank refused" {
				t.Fatalf("the failing booking: %+v %+v", job, job.Error)
			}
			if got := ledger(t, db); got != "i-1:10" {
				t.Fatalf("ledger %q, want only the committed booking", got)
			}
			mails, err := admin.ListJobs(ctx, workhorse.ListJobsFilter{Type: "invoice.mail"})
			must(t, err)
			if len(mails.Items) != 1 || !sameJSON(mails.Items[0].Payload, `"i-1"`) {
				t.Fatalf("enqueued mails: %+v", mails.Items)
			}
			for id, want := range map[string]int{ok: 1, failing: 0} {
				checkpoints, err := admin.ListCheckpoints(ctx, id)
				must(t, err)
				if len(checkpoints) != want {
					t.Fatalf("checkpoints of %s: %+v, want %d", id, checkpoints, want)
				}
				job, err := admin.GetJob(ctx, id)
				must(t, err)
				if !sameJSON(job.Progress, `"booked"`) {
					t.Fatalf("progress of %s: %s", id, job.Progress)
				}
			}
		})
	}
}

// A cancel requested while the handler ran wins over its result: the job ends canceled and
// the handler's writes are rolled back.
func TestATransactionalHandlerCanceledMeanwhileRollsBack(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, "CREATE TABLE ledger (invoice text PRIMARY KEY, amount int NOT NULL)")
	must(t, err)
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	w := newWorker(t, db, workhorse.WorkerOptions{Heartbeat: 25 * time.Second})
	entered := make(chan string, 1)
	release := make(chan struct{})
	must(t, workhorse.HandleTx(w, "invoice.book", func(ctx context.Context, job *workhorse.Job, tx *workhorse.HandlerTx, b booking) (any, error) {
		if _, err := tx.Pgx().Exec(ctx, "INSERT INTO ledger (invoice, amount) VALUES ($1, $2)", b.Invoice, b.Amount); err != nil {
			return nil, err
		}
		entered <- job.ID
		<-release // the heartbeat that would tell it about the cancel does not come within the test
		return nil, nil
	}))
	startWorker(t, w)
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "invoice.book", booking{Invoice: "i-3", Amount: 30}, nil)
	must(t, err)
	<-entered
	result, err := admin.Cancel(ctx, id, "customer left")
	must(t, err)
	if result != workhorse.CancelRequested {
		t.Fatalf("cancel: %s", result)
	}
	close(release)
	job := waitForState(t, admin, id, 20*time.Second, workhorse.StateSucceeded, workhorse.StateCanceled, workhorse.StateFailed)
	if job.State != workhorse.StateCanceled {
		t.Fatalf("job %+v %+v", job, job.Error)
	}
	if got := ledger(t, db); got != "" {
		t.Fatalf("ledger %q, want nothing", got)
	}
}
