package workhorsetest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
	"github.com/stablemates/nestjs-workhorse/sdk/go/workhorsetest"
)

// fatals runs f with a testing.TB whose Fatal and Fatalf are recorded (and end f, as they end a
// test), and returns what they said ("" when f did not fail).
func fatals(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.message
}

type recorder struct {
	testing.TB
	mu      sync.Mutex
	message string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.message = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

type resize struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

func (resize) Kind() string { return "image.resize" }

func TestRequireEnqueuedSelectsByTypeQueuePayloadAndTime(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	pool := workhorse.Pgx(db.Pool)
	_, err := queue.Enqueue(ctx, "image.resize", resize{Image: "old.png", Width: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	first, err := workhorse.EnqueueArgs(ctx, queue, resize{Image: "a.png", Width: 100}, &workhorse.EnqueueOptions{Queue: "images"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := workhorse.EnqueueArgs(ctx, queue, resize{Image: "b.png", Width: 200}, &workhorse.EnqueueOptions{Queue: "images"})
	if err != nil {
		t.Fatal(err)
	}

	jobs := workhorsetest.RequireEnqueued(t, pool, workhorsetest.Filter{Type: "image.resize", Since: since})
	if len(jobs) != 2 || jobs[0].ID != first || jobs[1].ID != second {
		t.Fatalf("since: %+v", jobs)
	}
	if job := workhorsetest.RequireEnqueuedArgs(t, pool, resize{Image: "b.png", Width: 200}, &workhorsetest.Filter{Queue: "images"}); job.ID != second {
		t.Fatalf("by args: %+v", job)
	}
	if all := workhorsetest.RequireEnqueued(t, pool, workhorsetest.Filter{}); len(all) != 3 {
		t.Fatalf("all: %d jobs", len(all))
	}
	workhorsetest.RequireNotEnqueued(t, pool, workhorsetest.Filter{Type: "image.resize", Queue: "default", Since: since})

	if msg := fatals(t, func(tb testing.TB) {
		workhorsetest.RequireEnqueuedArgs(tb, pool, resize{Image: "c.png", Width: 1}, nil)
	}); msg != `workhorsetest: no job (type image.resize, with payload {"image":"c.png","width":1}) was enqueued` {
		t.Fatalf("a missing job: %q", msg)
	}
	if msg := fatals(t, func(tb testing.TB) {
		workhorsetest.RequireNotEnqueued(tb, pool, workhorsetest.Filter{Queue: "images"})
	}); msg != "workhorsetest: 2 job(s) (queue images) were enqueued, the first "+first {
		t.Fatalf("an unwanted job: %q", msg)
	}
}

func TestDrainRunsDueJobsAndTheirFollowUpsThenStops(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	pool := workhorse.Pgx(db.Pool)
	queue := workhorse.NewQueue(pool)
	worker, err := workhorse.NewWorker(pool, workhorse.WorkerOptions{Queues: []string{"fan"}, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := workhorse.Handle(worker, "fan-out", func(ctx context.Context, job *workhorse.Job, names []string) (int, error) {
		for _, name := range names {
			if _, err := queue.Enqueue(ctx, "greet", name, &workhorse.EnqueueOptions{Queue: "fan"}); err != nil {
				return 0, err
			}
		}
		return len(names), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := workhorse.Handle(worker, "greet", func(ctx context.Context, job *workhorse.Job, name string) (string, error) {
		return "hello " + name, nil
	}); err != nil {
		t.Fatal(err)
	}
	later, err := queue.Enqueue(ctx, "greet", "later", &workhorse.EnqueueOptions{Queue: "fan", RunAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	fan, err := queue.Enqueue(ctx, "fan-out", []string{"ada", "bob"}, &workhorse.EnqueueOptions{Queue: "fan"})
	if err != nil {
		t.Fatal(err)
	}
	if err := workhorsetest.Drain(ctx, pool, worker); err != nil {
		t.Fatal(err)
	}
	if job := workhorsetest.RequireState(t, pool, fan, workhorse.StateSucceeded); string(job.Result) != "2" {
		t.Fatalf("fan-out: %+v", job)
	}
	greeted := workhorsetest.RequireEnqueued(t, pool, workhorsetest.Filter{Type: "greet", States: []workhorse.JobState{workhorse.StateSucceeded}})
	if len(greeted) != 2 {
		t.Fatalf("greeted: %+v", greeted)
	}
	// Not due: left alone; and the worker has stopped.
	if job := workhorsetest.RequireState(t, pool, later, workhorse.StateScheduled); job == nil {
		t.Fatal("later")
	}
	if err := worker.Run(ctx); err == nil {
		t.Fatal("the drained worker runs again")
	}
}

func TestDrainGivesUpWithWhatIsStillDue(t *testing.T) {
	db := testpg.New(t)
	pool := workhorse.Pgx(db.Pool)
	worker, err := workhorse.NewWorker(pool, workhorse.WorkerOptions{Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := workhorse.Handle(worker, "stuck", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	id, err := workhorse.NewQueue(pool).Enqueue(context.Background(), "stuck", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = workhorsetest.Drain(ctx, pool, worker)
	var timeout *workhorsetest.DrainTimeoutError
	if !errors.As(err, &timeout) || !errors.Is(err, context.DeadlineExceeded) || len(timeout.Due) != 1 || timeout.Due[0].ID != id ||
		!strings.Contains(err.Error(), id+" (stuck on default, active, attempt 1)") {
		t.Fatalf("drain: %v", err)
	}
}

func TestWaitForStateSaysWhyNot(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	pool := workhorse.Pgx(db.Pool)
	id, err := workhorse.NewQueue(pool).Enqueue(ctx, "never.run", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = workhorsetest.WaitForState(short, pool, id, workhorse.StateSucceeded)
	var stateErr *workhorsetest.StateError
	if !errors.As(err, &stateErr) || stateErr.Job == nil || stateErr.Job.State != workhorse.StateReady ||
		!strings.Contains(err.Error(), "did not reach succeeded: context deadline exceeded; it is ready (attempt 0 of 25") {
		t.Fatalf("a timeout: %v", err)
	}
	if _, err := workhorse.NewAdmin(pool).Cancel(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	_, err = workhorsetest.WaitForState(ctx, pool, id, workhorse.StateSucceeded)
	if !errors.As(err, &stateErr) || !strings.Contains(err.Error(), "ended canceled and will never reach succeeded") {
		t.Fatalf("another terminal state: %v", err)
	}
	_, err = workhorsetest.WaitForState(ctx, pool, "01a22858-3d78-7624-95c6-4dc3ae0605a2", workhorse.StateSucceeded)
	if !errors.As(err, &stateErr) || !strings.Contains(err.Error(), "no job 01a22858-3d78-7624-95c6-4dc3ae0605a2 exists") {
		t.Fatalf("no such job: %v", err)
	}
	if msg := fatals(t, func(tb testing.TB) { workhorsetest.RequireState(tb, pool, id, workhorse.StateSucceeded) }); !strings.Contains(msg, "ended canceled") {
		t.Fatalf("RequireState: %q", msg)
	}
}
