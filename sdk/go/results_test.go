package workhorse_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// registered reports whether a wait registered the job (its first read committed).
func registered(t *testing.T, pool *pgxpool.Pool, jobID string) bool {
	t.Helper()
	var n int
	must(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM workhorse.result_waiter WHERE job_id = $1", jobID).Scan(&n))
	return n == 1
}

// afterRegistration runs then once a wait registered jobID.
func afterRegistration(t *testing.T, pool *pgxpool.Pool, jobID string, then func()) {
	t.Helper()
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			var n int
			if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM workhorse.result_waiter WHERE job_id = $1", jobID).Scan(&n); err == nil && n == 1 {
				then()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

func claimAndFinish(t *testing.T, pool *pgxpool.Pool, queue, sqlText string, arg string) {
	ctx := context.Background()
	var id string
	var fence int64
	if err := pool.QueryRow(ctx, "SELECT job_id::text, fence_token FROM workhorse.claim_many_v1($1, 'go-wait-worker', 1, 60000)", []string{queue}).Scan(&id, &fence); err != nil {
		t.Error(err)
		return
	}
	if _, err := pool.Exec(ctx, sqlText, id, fence, arg); err != nil {
		t.Error(err)
	}
}

const completeSQL = "SELECT workhorse.complete_v1($1, 'go-wait-worker', $2, $3::jsonb)"
const failSQL = "SELECT * FROM workhorse.fail_v1($1, 'go-wait-worker', $2, $3::jsonb, '{}'::jsonb)"

func TestWaitForResultWakesOnTheNotificationOfTheEnd(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	id, err := queue.Enqueue(ctx, "go.wait", map[string]int{"n": 2}, &workhorse.EnqueueOptions{Queue: "go-wait"})
	must(t, err)
	afterRegistration(t, db.Pool, id, func() { claimAndFinish(t, db.Pool, "go-wait", completeSQL, `{"doubled": 4}`) })
	started := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	result, err := queue.WaitForResult(wctx, id)
	must(t, err)
	var got struct{ Doubled int }
	must(t, json.Unmarshal(result, &got))
	if got.Doubled != 4 {
		t.Fatalf("result %s", result)
	}
	// Woken by the notification, not the 5 s poll.
	if elapsed := time.Since(started); elapsed > 4*time.Second {
		t.Fatalf("woke after %s", elapsed)
	}
	if registered(t, db.Pool, id) {
		t.Fatal("the registration outlived the end")
	}
	// An ended job answers at once.
	if again, err := queue.WaitForResult(ctx, id); err != nil || string(again) != string(result) {
		t.Fatalf("again: %s %v", again, err)
	}
}

func TestWaitForResultTypedEndsDeadlineAndCancel(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))

	dead, err := queue.Enqueue(ctx, "go.wait", nil, &workhorse.EnqueueOptions{Queue: "go-wait-dead", MaxAttempts: 1})
	must(t, err)
	afterRegistration(t, db.Pool, dead, func() {
		claimAndFinish(t, db.Pool, "go-wait-dead", failSQL, `{"name": "KeyError", "message": "no invoice"}`)
	})
	_, err = queue.WaitForResult(ctx, dead)
	var failed *workhorse.JobFailedError
	if !errors.As(err, &failed) || failed.Err.Name != "KeyError" || failed.Err.Message != "no invoice" {
		t.Fatalf("dead job: %v", err)
	}

	canceled, err := queue.Enqueue(ctx, "go.wait", nil, &workhorse.EnqueueOptions{Queue: "go-wait-cancel"})
	must(t, err)
	_, err = db.Pool.Exec(ctx, "SELECT workhorse.cancel_v1($1, 'ops')", canceled)
	must(t, err)
	_, err = queue.WaitForResult(ctx, canceled)
	var cancelledEnd *workhorse.JobResultCanceledError
	var cancelled *workhorse.JobCanceledError
	if !errors.As(err, &cancelledEnd) || !errors.As(err, &cancelled) || cancelledEnd.Err.Name != "Canceled" {
		t.Fatalf("canceled job: %v", err)
	}

	slow, err := queue.Enqueue(ctx, "go.wait", nil, &workhorse.EnqueueOptions{Queue: "go-wait-slow"})
	must(t, err)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = queue.WaitForResult(short, slow)
	var timeout *workhorse.WaitForResultTimeoutError
	if !errors.As(err, &timeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v", err)
	}
	var state string
	must(t, db.Pool.QueryRow(ctx, "SELECT state FROM workhorse.job_runtime WHERE job_id = $1", slow).Scan(&state))
	if state != "ready" {
		t.Fatalf("the job after the deadline: %s", state)
	}
	stop, cancelWait := context.WithCancel(ctx)
	afterRegistration(t, db.Pool, slow, cancelWait)
	if _, err = queue.WaitForResult(stop, slow); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}

	var invalid *workhorse.ValidationError
	if _, err = queue.WaitForResult(ctx, "nope"); !errors.As(err, &invalid) || invalid.Field != "jobId" {
		t.Fatalf("bad id: %v", err)
	}
}

func TestWaitForResultRevealsNoForeignJob(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "go.wait", nil, &workhorse.EnqueueOptions{Queue: "go-wait-private"})
	must(t, err)
	other, _ := capabilityRolePool(t, db, "producer")
	var notFound *workhorse.JobNotFoundError
	if _, err := workhorse.NewQueue(workhorse.Pgx(other)).WaitForResult(ctx, id); !errors.As(err, &notFound) {
		t.Fatalf("foreign live job: %v", err)
	}
	if registered(t, db.Pool, id) {
		t.Fatal("a foreign wait registered the job")
	}
	claimAndFinish(t, db.Pool, "go-wait-private", completeSQL, `"secret"`)
	if _, err := workhorse.NewQueue(workhorse.Pgx(other)).WaitForResult(ctx, id); !errors.As(err, &notFound) {
		t.Fatalf("foreign ended job: %v", err)
	}
}

func TestWaitForResultThroughDatabaseSQL(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	sqldb, err := sql.Open("pgx", db.URL)
	must(t, err)
	defer sqldb.Close()
	queue := workhorse.NewQueue(workhorse.SQL(sqldb))
	id, err := queue.Enqueue(ctx, "go.wait", nil, &workhorse.EnqueueOptions{Queue: "go-wait-sql"})
	must(t, err)
	afterRegistration(t, db.Pool, id, func() { claimAndFinish(t, db.Pool, "go-wait-sql", completeSQL, `[1, 2]`) })
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	result, err := queue.WaitForResult(wctx, id)
	must(t, err)
	if string(result) != "[1, 2]" {
		t.Fatalf("result %s", result)
	}
}
