package workhorse_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// events records a worker's events for a test.
type events struct {
	mu   sync.Mutex
	list []workhorse.Event
}

func (e *events) add(ev workhorse.Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
}

func (e *events) find(name workhorse.EventName, jobID string) *workhorse.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.list {
		if e.list[i].Name == name && (jobID == "" || e.list[i].JobID == jobID) {
			ev := e.list[i]
			return &ev
		}
	}
	return nil
}

func (e *events) wait(t *testing.T, name workhorse.EventName, jobID string, timeout time.Duration) workhorse.Event {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ev := e.find(name, jobID); ev != nil {
			return *ev
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %s event for job %q within %s", name, jobID, timeout)
	return workhorse.Event{}
}

func TestRunUntilTheContextEndsThenDrain(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	var seen events
	w := newWorker(t, db, workhorse.WorkerOptions{OnEvent: seen.add})
	release := make(chan struct{})
	if err := workhorse.Handle(w, "slow", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) {
		<-release
		return "finished", nil
	}); err != nil {
		t.Fatal(err)
	}
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	running, err := queue.Enqueue(ctx, "slow", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	seen.wait(t, workhorse.EventJobClaimed, running, 10*time.Second)
	cancel()
	time.Sleep(100 * time.Millisecond) // the drain has begun: no new claims from here on
	waiting, err := queue.Enqueue(ctx, "slow", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned while a handler ran: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if job, _ := admin.GetJob(ctx, running); job.State != workhorse.StateSucceeded || string(job.Result) != `"finished"` {
		t.Fatalf("the running job: %+v", job)
	}
	if job, _ := admin.GetJob(ctx, waiting); job.State != workhorse.StateReady {
		t.Fatalf("a job enqueued during the drain is %s", job.State)
	}
	if seen.find(workhorse.EventWorkerStarted, "") == nil || seen.find(workhorse.EventWorkerStopped, "") == nil {
		t.Fatal("no worker.started or worker.stopped")
	}
	if err := w.Run(ctx); err == nil {
		t.Fatal("a second Run was accepted")
	}
}

func TestAHandlerThatOutlivesTheShutdownIsAbandonedAndNothingIsRecorded(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	var seen events
	w := newWorker(t, db, workhorse.WorkerOptions{ShutdownTimeout: 200 * time.Millisecond, OnEvent: seen.add})
	cause := make(chan error, 1)
	if err := workhorse.Handle(w, "stubborn", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return "too late", nil
	}); err != nil {
		t.Fatal(err)
	}
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "stubborn", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	seen.wait(t, workhorse.EventJobClaimed, id, 10*time.Second)
	stop()
	var shutdown *workhorse.WorkerShutdownError
	if err := <-cause; !errors.As(err, &shutdown) || shutdown.JobID != id {
		t.Fatalf("the handler's context ended with %v", err)
	}
	seen.wait(t, workhorse.EventJobAbandoned, id, time.Second)
	time.Sleep(50 * time.Millisecond)
	job, _ := workhorse.NewAdmin(workhorse.Pgx(db.Pool)).GetJob(ctx, id)
	if job.State != workhorse.StateActive || job.Result != nil {
		t.Fatalf("the abandoned job is %s with result %s; its lease should simply expire", job.State, job.Result)
	}
}

// With a poll of a minute, a job enqueued while the worker is idle runs at once: a notification
// woke it, through a pgx pool, through database/sql on pgx's driver, and through ListenURL.
func TestAnIdleWorkerWakesOnANotification(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	defer sqlDB.Close()
	for _, setup := range []struct {
		name      string
		db        workhorse.DB
		listenURL string
	}{{"pgx", workhorse.Pgx(db.Pool), ""}, {"database/sql", workhorse.SQL(sqlDB), ""}, {"ListenURL", workhorse.SQL(sqlDB), db.URL}} {
		var seen events
		w, err := workhorse.NewWorker(setup.db, workhorse.WorkerOptions{Poll: time.Minute, ListenURL: setup.listenURL, OnEvent: seen.add})
		if err != nil {
			t.Fatal(err)
		}
		if err := workhorse.Handle(w, "ping", func(context.Context, *workhorse.Job, any) (string, error) { return "pong", nil }); err != nil {
			t.Fatal(err)
		}
		stop := startWorker(t, w)
		time.Sleep(500 * time.Millisecond) // the first empty claim is over: the worker waits for a minute's poll
		id, err := workhorse.NewQueue(setup.db).Enqueue(ctx, "ping", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		seen.wait(t, workhorse.EventJobSucceeded, id, 20*time.Second)
		stop()
		if e := seen.find(workhorse.EventWorkerError, ""); e != nil {
			t.Fatalf("%s: worker error during %s: %v", setup.name, e.During, e.Err)
		}
	}
}

func TestPollingAloneRunsJobsOverDatabaseSQL(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	defer sqlDB.Close()
	for _, noListen := range []bool{true, false} {
		var seen events
		w, err := workhorse.NewWorker(workhorse.SQL(sqlDB), workhorse.WorkerOptions{NoListen: noListen, Poll: 50 * time.Millisecond, OnEvent: seen.add})
		if err != nil {
			t.Fatal(err)
		}
		if err := workhorse.Handle(w, "sql", func(_ context.Context, job *workhorse.Job, n int) (int, error) { return n * 2, nil }); err != nil {
			t.Fatal(err)
		}
		stop := startWorker(t, w)
		id, err := workhorse.NewQueue(workhorse.SQL(sqlDB)).Enqueue(ctx, "sql", 21, nil)
		if err != nil {
			t.Fatal(err)
		}
		job := waitForState(t, workhorse.NewAdmin(workhorse.SQL(sqlDB)), id, 10*time.Second, workhorse.StateSucceeded)
		if string(job.Result) != "42" {
			t.Fatalf("result %s", job.Result)
		}
		stop()
		if e := seen.find(workhorse.EventWorkerError, ""); e != nil {
			t.Fatalf("worker error during %s: %v", e.During, e.Err)
		}
	}
}

func TestHeartbeatsKeepAJobBeyondItsLease(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	w := newWorker(t, db, workhorse.WorkerOptions{Lease: time.Second})
	if err := workhorse.Handle(w, "long", func(ctx context.Context, job *workhorse.Job, _ any) (int, error) {
		select {
		case <-time.After(3 * time.Second):
			return job.Attempt, nil
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "long", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := waitForState(t, workhorse.NewAdmin(workhorse.Pgx(db.Pool)), id, 20*time.Second, workhorse.StateSucceeded, workhorse.StateFailed)
	if job.State != workhorse.StateSucceeded || job.CurrentAttempt != 1 || string(job.Result) != "1" {
		t.Fatalf("job %+v", job)
	}
}

// runCounted runs count jobs through a worker with these options, each holding its slot for
// hold; it returns the most handlers that ran at once and the largest claim.
func runCounted(t *testing.T, count int, o workhorse.WorkerOptions, hold time.Duration) (peak int64, largestClaim int) {
	t.Helper()
	db := testpg.New(t)
	ctx := context.Background()
	requests := make([]workhorse.EnqueueRequest, count)
	for i := range requests {
		requests[i] = workhorse.EnqueueRequest{Type: "counted", Payload: i}
	}
	ids, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).EnqueueMany(ctx, requests)
	if err != nil {
		t.Fatal(err)
	}
	var running atomic.Int64
	w := newWorker(t, db, o)
	if err := workhorse.Handle(w, "counted", func(ctx context.Context, job *workhorse.Job, n int) (int, error) {
		now := running.Add(1)
		for {
			p := atomic.LoadInt64(&peak)
			if now <= p || atomic.CompareAndSwapInt64(&peak, p, now) {
				break
			}
		}
		time.Sleep(hold)
		running.Add(-1)
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	for _, id := range ids {
		waitForState(t, admin, id, 30*time.Second, workhorse.StateSucceeded)
	}
	err = db.Pool.QueryRow(ctx, "SELECT max(n) FROM (SELECT count(*) AS n FROM workhorse.job_event WHERE kind = 'claimed' GROUP BY at) AS c").Scan(&largestClaim)
	if err != nil {
		t.Fatal(err)
	}
	return atomic.LoadInt64(&peak), largestClaim
}

func TestNeverMoreHandlersThanConcurrency(t *testing.T) {
	peak, largest := runCounted(t, 20, workhorse.WorkerOptions{Concurrency: 5}, 50*time.Millisecond)
	if peak != 5 || largest > 5 {
		t.Fatalf("peak %d, largest claim %d; want 5 and at most 5", peak, largest)
	}
}

func TestOneClaimFillsEveryFreeSlot(t *testing.T) {
	_, largest := runCounted(t, 250, workhorse.WorkerOptions{Concurrency: 250}, 300*time.Millisecond)
	if largest != 250 {
		t.Fatalf("largest claim %d, want 250", largest)
	}
}

func TestTwoRoundTripsSplitTheSlots(t *testing.T) {
	peak, largest := runCounted(t, 30, workhorse.WorkerOptions{Concurrency: 7, RoundTrips: 2}, 100*time.Millisecond)
	if peak != 7 || largest > 4 {
		t.Fatalf("peak %d, largest claim %d; want 7 slots used, claims of at most 4", peak, largest)
	}
}

func TestAJobOfAnUnknownTypeIsReleasedWithoutSpendingAnAttempt(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	var seen events
	w := newWorker(t, db, workhorse.WorkerOptions{UnknownTypeDelay: time.Hour, OnEvent: seen.add})
	if err := workhorse.Handle(w, "known", func(context.Context, *workhorse.Job, any) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "unknown", nil, &workhorse.EnqueueOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	released := seen.wait(t, workhorse.EventJobReleased, id, 10*time.Second)
	stop()
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	job, _ := admin.GetJob(ctx, id)
	// Attempt 1 is closed as released: its number is used, its place in MaxAttempts given back.
	if job.State != workhorse.StateScheduled || job.CurrentAttempt != 1 || job.MaxAttempts != 1 || released.Reason == "" {
		t.Fatalf("job %+v, event %+v", job, released)
	}
	if _, err := db.Pool.Exec(ctx, "UPDATE workhorse.job_runtime SET run_at = now()"); err != nil {
		t.Fatal(err)
	}
	other := newWorker(t, db, workhorse.WorkerOptions{})
	if err := workhorse.Handle(other, "unknown", func(_ context.Context, job *workhorse.Job, _ any) (int, error) { return job.Attempt, nil }); err != nil {
		t.Fatal(err)
	}
	startWorker(t, other)
	if job := waitForState(t, admin, id, 10*time.Second, workhorse.StateSucceeded); string(job.Result) != "2" {
		t.Fatalf("ran at attempt %s", job.Result)
	}
}

func TestWorkerOptionsAreChecked(t *testing.T) {
	db := testpg.New(t)
	cases := []struct {
		o     workhorse.WorkerOptions
		field string
	}{
		{workhorse.WorkerOptions{Concurrency: 1001}, "concurrency"},
		{workhorse.WorkerOptions{RoundTrips: 5}, "roundTrips"},
		{workhorse.WorkerOptions{Concurrency: 2, RoundTrips: 3}, "roundTrips"},
		{workhorse.WorkerOptions{Queues: []string{"ok", "not ok"}}, "queues[1]"},
		{workhorse.WorkerOptions{Lease: 500 * time.Millisecond}, "leaseMs"},
		{workhorse.WorkerOptions{Lease: 2 * time.Second, Heartbeat: 3 * time.Second}, "heartbeatMs"},
		{workhorse.WorkerOptions{Poll: time.Millisecond}, "pollMs"},
	}
	for _, c := range cases {
		_, err := workhorse.NewWorker(workhorse.Pgx(db.Pool), c.o)
		var invalid *workhorse.ValidationError
		if !errors.As(err, &invalid) || invalid.Field != c.field {
			t.Errorf("%+v: got %v, want a ValidationError naming %s", c.o, err, c.field)
		}
	}
	tx, err := db.Pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := workhorse.NewWorker(workhorse.Pgx(tx), workhorse.WorkerOptions{}); err == nil {
		t.Error("a worker on a transaction was accepted")
	}
	w := newWorker(t, db, workhorse.WorkerOptions{})
	handler := func(context.Context, *workhorse.Job, any) (any, error) { return nil, nil }
	if err := workhorse.Handle(w, "twice", handler); err != nil {
		t.Fatal(err)
	}
	var state *workhorse.WorkerStateError
	if err := workhorse.Handle(w, "twice", handler); !errors.As(err, &state) {
		t.Errorf("a second handler for one type: %v", err)
	}
}

func TestAWorkerRegistersAsGoAndHonoursADrainRequest(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	release := make(chan struct{})
	draining := make(chan struct{}, 1)
	w := newWorker(t, db, workhorse.WorkerOptions{WorkerID: "go-worker-1", Concurrency: 3, Heartbeat: 200 * time.Millisecond, Lease: 5 * time.Second,
		OnEvent: func(e workhorse.Event) {
			if e.Name == workhorse.EventWorkerDraining {
				draining <- struct{}{}
			}
		}})
	must(t, workhorse.Handle(w, "hold", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) {
		<-release
		return "done", nil
	}))
	held, err := queue.Enqueue(ctx, "hold", nil, nil)
	must(t, err)
	stop := startWorker(t, w)
	waitForState(t, admin, held, 20*time.Second, workhorse.StateActive)
	info := waitForWorker(t, admin, "go-worker-1", func(i workhorse.WorkerInfo) bool { return i.InFlight == 1 })
	if info.Status != workhorse.WorkerRunning || info.Version != "go/"+workhorse.SDKVersion || info.Concurrency != 3 ||
		join(info.Queues) != "default" || info.PID != os.Getpid() {
		t.Fatalf("registered as %+v", info)
	}

	if r, err := admin.DrainWorker(ctx, "go-worker-1", workhorse.ActorOptions{Actor: "ops", Reason: "deploy"}); err != nil || r != workhorse.DrainRequested {
		t.Fatalf("drain: %s %v", r, err)
	}
	<-draining
	if !w.Draining() {
		t.Fatal("the worker does not say it drains")
	}
	waitForWorker(t, admin, "go-worker-1", func(i workhorse.WorkerInfo) bool { return i.Status == workhorse.WorkerDraining })
	// A drained worker claims nothing new, and finishes what it holds.
	later, err := queue.Enqueue(ctx, "hold", nil, nil)
	must(t, err)
	close(release)
	waitForState(t, admin, held, 20*time.Second, workhorse.StateSucceeded)
	waitForWorker(t, admin, "go-worker-1", func(i workhorse.WorkerInfo) bool { return i.Status == workhorse.WorkerDrained })
	if job, _ := admin.GetJob(ctx, later); job.State != workhorse.StateReady {
		t.Fatalf("a draining worker claimed job %s: %s", later, job.State)
	}
	stop()
	if list, err := admin.ListWorkers(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after stop the registry holds %+v (%v)", list, err)
	}
}

func waitForWorker(t *testing.T, admin *workhorse.Admin, id string, ok func(workhorse.WorkerInfo) bool) workhorse.WorkerInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last []workhorse.WorkerInfo
	for time.Now().Before(deadline) {
		list, err := admin.ListWorkers(context.Background())
		must(t, err)
		last = list
		for _, i := range list {
			if i.WorkerID == id && ok(i) {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("worker %s never got there: %+v", id, last)
	return workhorse.WorkerInfo{}
}
