package workhorse_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

type charge struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

func TestACheckpointReplaysOnTheNextAttemptElsewhere(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	var charges atomic.Int32
	saved := make(chan struct{}, 1)
	fulfill := func(block bool) func(context.Context, *workhorse.Job, int) (map[string]any, error) {
		return func(ctx context.Context, job *workhorse.Job, cents int) (map[string]any, error) {
			c, err := workhorse.Checkpoint(ctx, job, "charge", func(context.Context) (charge, error) {
				charges.Add(1)
				return charge{ID: "ch_1", Cents: cents}, nil
			})
			if err != nil {
				return nil, err
			}
			if block {
				saved <- struct{}{}
				<-ctx.Done() // dies here, as far as the database can tell
				return nil, ctx.Err()
			}
			return map[string]any{"charge": c, "attempt": job.Attempt}, nil
		}
	}
	a := newWorker(t, db, workhorse.WorkerOptions{Lease: time.Second, WorkerID: "worker-a"})
	if err := workhorse.Handle(a, "fulfill", fulfill(true)); err != nil {
		t.Fatal(err)
	}
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "fulfill", 4200, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopA := startWorker(t, a)
	<-saved
	// A stop that gives its handlers no time records nothing for them: as if the process died.
	killed, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.Stop(killed); err != nil {
		t.Fatal(err)
	}
	stopA()

	b := newWorker(t, db, workhorse.WorkerOptions{WorkerID: "worker-b"})
	if err := workhorse.Handle(b, "fulfill", fulfill(false)); err != nil {
		t.Fatal(err)
	}
	startWorker(t, b)
	job := waitForState(t, admin, id, 20*time.Second, workhorse.StateSucceeded)
	if !sameJSON(job.Result, `{"attempt": 2, "charge": {"id": "ch_1", "cents": 4200}}`) {
		t.Fatalf("result %s", job.Result)
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("the charge ran %d times", n)
	}
	if got := attempts(t, db, id); got != "1:expired 2:succeeded" {
		t.Fatalf("attempts %s", got)
	}
}

func TestADurableSleepFreesTheSlotAndResumesTheSameAttempt(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	var stages atomic.Int32
	var seen events
	w := newWorker(t, db, workhorse.WorkerOptions{Concurrency: 1, OnEvent: seen.add})
	if err := workhorse.Handle(w, "nap", func(ctx context.Context, job *workhorse.Job, _ any) (int, error) {
		if _, err := workhorse.Checkpoint(ctx, job, "before", func(context.Context) (int, error) { return int(stages.Add(1)), nil }); err != nil {
			return 0, err
		}
		if err := job.Sleep(ctx, "nap", 700*time.Millisecond); err != nil {
			return 0, err
		}
		return job.Attempt, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := workhorse.Handle(w, "quick", func(context.Context, *workhorse.Job, any) (string, error) { return "ran", nil }); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	id, err := queue.Enqueue(ctx, "nap", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sleeping := seen.wait(t, workhorse.EventJobSleeping, id, 10*time.Second)
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	// The only slot is free while the job sleeps.
	quick, err := queue.Enqueue(ctx, "quick", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitForState(t, admin, quick, 10*time.Second, workhorse.StateSucceeded)
	if job, _ := admin.GetJob(ctx, id); job.State != workhorse.StateScheduled {
		t.Fatalf("the sleeping job is %s", job.State)
	}
	job := waitForState(t, admin, id, 20*time.Second, workhorse.StateSucceeded)
	if string(job.Result) != "1" || stages.Load() != 1 || !job.FinishedAt.After(sleeping.WakeAt.Add(-time.Millisecond)) {
		t.Fatalf("result %s, stages %d, finished %s, wake %s", job.Result, stages.Load(), job.FinishedAt, sleeping.WakeAt)
	}
}

func TestCancelingARunningJobCancelsItsContext(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	var seen events
	w := newWorker(t, db, workhorse.WorkerOptions{Lease: 1500 * time.Millisecond, OnEvent: seen.add})
	cause := make(chan error, 1)
	if err := workhorse.Handle(w, "cancelable", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "cancelable", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen.wait(t, workhorse.EventJobClaimed, id, 10*time.Second)
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	if got, err := admin.Cancel(ctx, id, "no longer needed"); err != nil || got != workhorse.CancelRequested {
		t.Fatalf("Cancel: %s, %v", got, err)
	}
	var canceled *workhorse.JobCanceledError
	if err := <-cause; !errors.As(err, &canceled) || canceled.JobID != id {
		t.Fatalf("cause %v", err)
	}
	job := waitForState(t, admin, id, 10*time.Second, workhorse.StateCanceled)
	if job.Error == nil || job.Error.Message != "no longer needed" {
		t.Fatalf("job %+v", job)
	}
	seen.wait(t, workhorse.EventJobCanceled, id, time.Second)
}

func TestAWorkerThatLostItsLeaseWritesNothing(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	var seen events
	// One slot, which the lost run holds until its handler returns: A cannot claim the job back.
	a := newWorker(t, db, workhorse.WorkerOptions{Concurrency: 1, Lease: 1500 * time.Millisecond, WorkerID: "worker-a", OnEvent: seen.add})
	cause := make(chan error, 1)
	release := make(chan struct{})
	if err := workhorse.Handle(a, "taken", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		<-release
		// Too late: the job is another worker's now.
		_, err := workhorse.Checkpoint(context.Background(), job, "late", func(context.Context) (int, error) { return 1, nil })
		return "from a", err
	}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, a)
	// No retry delay: recovery makes the job ready at once, for B to claim.
	noDelay := workhorse.FixedRetry(0)
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "taken", nil, &workhorse.EnqueueOptions{RetryPolicy: &noDelay})
	if err != nil {
		t.Fatal(err)
	}
	seen.wait(t, workhorse.EventJobClaimed, id, 10*time.Second)
	// Another worker takes the job over: its lease is made to run out, and recovery and a new
	// claim follow (as if A had been cut off from the database for longer than its lease).
	if _, err := db.Pool.Exec(ctx, "UPDATE workhorse.job_runtime SET lease_expires_at = clock_timestamp() WHERE job_id = $1", id); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, "SELECT workhorse.recover_expired_v1(10)"); err != nil {
		t.Fatal(err)
	}
	var fence int64
	if err := db.Pool.QueryRow(ctx, "SELECT fence_token FROM workhorse.claim_many_v1('{default}', 'worker-b', 1, 60000)").Scan(&fence); err != nil {
		t.Fatal(err)
	}
	var lost *workhorse.LeaseLostError
	if err := <-cause; !errors.As(err, &lost) {
		t.Fatalf("cause %v", err)
	}
	close(release)
	seen.wait(t, workhorse.EventJobLeaseLost, id, 10*time.Second)
	var owner string
	var checkpoints int
	if err := db.Pool.QueryRow(ctx, "SELECT worker_id, (SELECT count(*) FROM workhorse.job_checkpoint WHERE job_id = $1) FROM workhorse.job_runtime WHERE job_id = $1", id).Scan(&owner, &checkpoints); err != nil {
		t.Fatal(err)
	}
	if owner != "worker-b" || checkpoints != 0 {
		t.Fatalf("owner %s, checkpoints %d", owner, checkpoints)
	}
	// B finishes the job.
	if _, err := db.Pool.Exec(ctx, "SELECT workhorse.complete_v1($1, 'worker-b', $2, '\"from b\"')", id, fence); err != nil {
		t.Fatal(err)
	}
}
