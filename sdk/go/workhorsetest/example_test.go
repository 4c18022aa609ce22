package workhorsetest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/workhorsetest"
)

type WelcomeEmail struct {
	To string `json:"to"`
}

func (WelcomeEmail) Kind() string { return "email.welcome" }

// signUp is the code under test: it enqueues the welcome mail.
func signUp(ctx context.Context, queue *workhorse.Queue, email string) error {
	_, err := workhorse.EnqueueArgs(ctx, queue, WelcomeEmail{To: email}, nil)
	return err
}

func TestSignUpSendsTheWelcomeEmail(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testDatabaseURL(t)) // a database with the workhorse schema installed
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := workhorse.Pgx(pool)

	if err := signUp(ctx, workhorse.NewQueue(db), "a@example.com"); err != nil {
		t.Fatal(err)
	}
	job := workhorsetest.RequireEnqueuedArgs(t, db, WelcomeEmail{To: "a@example.com"}, nil)

	// Run what is due with the application's handlers, then look at the outcome.
	worker, err := workhorse.NewWorker(db, workhorse.WorkerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = workhorse.HandleArgs(worker, func(ctx context.Context, job *workhorse.Job, email WelcomeEmail) (string, error) {
		return "sent to " + email.To, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := workhorsetest.Drain(ctx, db, worker); err != nil {
		t.Fatal(err)
	}
	done := workhorsetest.RequireState(t, db, job.ID, workhorse.StateSucceeded)
	if string(done.Result) != `"sent to a@example.com"` {
		t.Fatalf("result %s", done.Result)
	}
}
