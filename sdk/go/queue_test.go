package workhorse_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

func countJobs(t *testing.T, db *testpg.DB) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM workhorse.job").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEnqueueJoinsTheCallersPgxTransaction(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	if _, err := db.Pool.Exec(ctx, "CREATE TABLE orders (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}

	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ('o-1')"); err != nil {
		t.Fatal(err)
	}
	rolledBack, err := queue.With(workhorse.Pgx(tx)).Enqueue(ctx, "order.fulfill", map[string]string{"orderId": "o-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	tx, err = db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ('o-2')"); err != nil {
		t.Fatal(err)
	}
	committed, err := queue.With(workhorse.Pgx(tx)).Enqueue(ctx, "order.fulfill", map[string]string{"orderId": "o-2"}, &workhorse.EnqueueOptions{Queue: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	if job, err := admin.GetJob(ctx, rolledBack); err != nil || job != nil {
		t.Fatalf("the rolled-back job exists: %+v, %v", job, err)
	}
	job, err := admin.GetJob(ctx, committed)
	if err != nil || job == nil {
		t.Fatalf("the committed job is missing: %v", err)
	}
	if job.State != workhorse.StateReady || job.Queue != "orders" || string(job.Payload) != `{"orderId": "o-2"}` {
		t.Fatalf("job %+v", job)
	}
}

func TestEnqueueJoinsTheCallersDatabaseSQLTransaction(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	defer sqlDB.Close()
	queue := workhorse.NewQueue(workhorse.SQL(sqlDB))

	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queue.With(workhorse.SQL(tx)).Enqueue(ctx, "a", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := countJobs(t, db); n != 0 {
		t.Fatalf("%d jobs after a rollback", n)
	}

	tx, err = sqlDB.BeginTx(ctx, &sql.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := queue.With(workhorse.SQL(tx)).EnqueueMany(ctx, []workhorse.EnqueueRequest{
		{Type: "a", Payload: 1},
		{Type: "b", Payload: "two", EnqueueOptions: workhorse.EnqueueOptions{Priority: 7, Tags: []string{"x"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	job, err := workhorse.NewAdmin(workhorse.SQL(sqlDB)).GetJob(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if job.Type != "b" || job.Priority != 7 || len(job.Tags) != 1 || job.Tags[0] != "x" || string(job.Payload) != `"two"` {
		t.Fatalf("job %+v", job)
	}
}

func TestEnqueueManyReturnsIDsInInputOrder(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	requests := make([]workhorse.EnqueueRequest, 300)
	for i := range requests {
		requests[i] = workhorse.EnqueueRequest{Type: "n", Payload: map[string]int{"i": i}}
	}
	ids, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).EnqueueMany(ctx, requests)
	if err != nil {
		t.Fatal(err)
	}
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	for _, i := range []int{0, 150, 299} {
		job, err := admin.GetJob(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ I int }
		if err := json.Unmarshal(job.Payload, &p); err != nil || p.I != i {
			t.Fatalf("ids[%d] is the job with payload %s", i, job.Payload)
		}
	}
	if empty, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).EnqueueMany(ctx, nil); err != nil || len(empty) != 0 {
		t.Fatalf("an empty batch: %v, %v", empty, err)
	}
}

func TestEnqueueWithEveryOption(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	runAt := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	deadline := runAt.Add(time.Hour)
	policy := workhorse.FixedRetry(1500 * time.Millisecond)
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "everything", nil, &workhorse.EnqueueOptions{
		Queue: "q1", Priority: 100, RunAt: runAt, MaxAttempts: 3, RetryPolicy: &policy, Tags: []string{"a", "ü"},
		Deadline: deadline, ExecutionTimeout: 2 * time.Second, IdempotencyKey: "k", IdempotencyScope: "s", IdempotencyTTL: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	job, err := workhorse.NewAdmin(workhorse.Pgx(db.Pool)).GetJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != workhorse.StateScheduled || !job.RunAt.Equal(runAt) || job.Deadline == nil || !job.Deadline.Equal(deadline) ||
		job.MaxAttempts != 3 || job.Priority != 100 || job.ExecutionTimeout != 2*time.Second || string(job.Payload) != "null" {
		t.Fatalf("job %+v", job)
	}
	if string(job.RetryPolicy) != `{"kind": "fixed", "delayMs": 1500}` {
		t.Fatalf("retry policy %s", job.RetryPolicy)
	}
}

func TestEnqueueRefusesBadInputNamingTheFieldBeforeWriting(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	deep := any(1)
	for i := 0; i < 101; i++ {
		deep = []any{deep}
	}
	big := strings.Repeat("x", 1<<20)
	tooManyTags := make([]string, 21)
	for i := range tooManyTags {
		tooManyTags[i] = "t"
	}
	bad := func(f float64) *workhorse.RetryPolicy {
		p := workhorse.ExponentialRetry(workhorse.ExponentialRetryOptions{Multiplier: f})
		return &p
	}
	inverted := workhorse.ExponentialRetry(workhorse.ExponentialRetryOptions{Initial: 10 * time.Second, Max: time.Second})
	cases := []struct {
		name    string
		typ     string
		payload any
		opts    workhorse.EnqueueOptions
		field   string
	}{
		{"empty type", "", 1, workhorse.EnqueueOptions{}, "type"},
		{"type with a space", "a b", 1, workhorse.EnqueueOptions{}, "type"},
		{"queue", "t", 1, workhorse.EnqueueOptions{Queue: "-x"}, "queue"},
		{"priority", "t", 1, workhorse.EnqueueOptions{Priority: 101}, "priority"},
		{"negative priority", "t", 1, workhorse.EnqueueOptions{Priority: -1}, "priority"},
		{"maxAttempts", "t", 1, workhorse.EnqueueOptions{MaxAttempts: 101}, "maxAttempts"},
		{"NaN", "t", math.NaN(), workhorse.EnqueueOptions{}, "payload"},
		{"NUL", "t", "a\x00b", workhorse.EnqueueOptions{}, "payload"},
		{"deep", "t", deep, workhorse.EnqueueOptions{}, "payload"},
		{"large", "t", big, workhorse.EnqueueOptions{}, "payload"},
		{"a channel", "t", make(chan int), workhorse.EnqueueOptions{}, "payload"},
		{"unpaired surrogate", "t", json.RawMessage(`"\ud800"`), workhorse.EnqueueOptions{}, "payload"},
		{"timeout", "t", 1, workhorse.EnqueueOptions{ExecutionTimeout: 999 * time.Millisecond}, "executionTimeoutMs"},
		{"timeout fraction", "t", 1, workhorse.EnqueueOptions{ExecutionTimeout: 1500*time.Millisecond + time.Microsecond}, "executionTimeoutMs"},
		{"runAt", "t", 1, workhorse.EnqueueOptions{RunAt: time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC)}, "runAt"},
		{"multiplier", "t", 1, workhorse.EnqueueOptions{RetryPolicy: bad(11)}, "retryPolicy.multiplier"},
		{"max below initial", "t", 1, workhorse.EnqueueOptions{RetryPolicy: &inverted}, "retryPolicy.maxMs"},
		{"tags", "t", 1, workhorse.EnqueueOptions{Tags: tooManyTags}, "tags"},
		{"a tag", "t", 1, workhorse.EnqueueOptions{Tags: []string{"ok", ""}}, "tags[1]"},
		{"scope without key", "t", 1, workhorse.EnqueueOptions{IdempotencyScope: "s"}, "idempotencyScope"},
		{"ttl without key", "t", 1, workhorse.EnqueueOptions{IdempotencyTTL: time.Minute}, "idempotencyTtlMs"},
		{"ttl", "t", 1, workhorse.EnqueueOptions{IdempotencyKey: "k", IdempotencyTTL: time.Millisecond}, "idempotencyTtlMs"},
	}
	for _, c := range cases {
		_, err := queue.Enqueue(ctx, c.typ, c.payload, &c.opts)
		var invalid *workhorse.ValidationError
		if !errors.As(err, &invalid) || invalid.Field != c.field {
			t.Errorf("%s: got %v, want a ValidationError naming %s", c.name, err, c.field)
		}
	}
	_, err := queue.EnqueueMany(ctx, []workhorse.EnqueueRequest{{Type: "ok", Payload: 1}, {Type: "", Payload: 2}})
	var invalid *workhorse.ValidationError
	if !errors.As(err, &invalid) || invalid.Field != "requests[1].type" {
		t.Errorf("batch: got %v", err)
	}
	_, err = queue.EnqueueMany(ctx, make([]workhorse.EnqueueRequest, 1001))
	if !errors.As(err, &invalid) || invalid.Field != "requests" {
		t.Errorf("a batch of 1001: got %v", err)
	}
	if n := countJobs(t, db); n != 0 {
		t.Fatalf("%d jobs written", n)
	}
}

func TestIdempotentEnqueue(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	opts := workhorse.EnqueueOptions{IdempotencyKey: "order-7", Priority: 5}
	first, err := queue.Enqueue(ctx, "charge", map[string]int{"cents": 100}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := queue.Enqueue(ctx, "charge", map[string]int{"cents": 100}, &opts)
	if err != nil || again != first {
		t.Fatalf("an exact repeat returned %s, %v; want %s", again, err, first)
	}
	changed := opts
	changed.Priority = 6
	_, err = queue.Enqueue(ctx, "charge", map[string]int{"cents": 200}, &changed)
	var conflict *workhorse.IdempotencyConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("got %v, want an IdempotencyConflictError", err)
	}
	if conflict.ExistingJobID != first || strings.Join(conflict.Fields, ",") != "payload,priority" || conflict.Field != "requests[0].idempotencyKey" {
		t.Fatalf("conflict %+v", conflict)
	}
	var invalid *workhorse.ValidationError
	if !errors.As(err, &invalid) {
		t.Fatal("an idempotency conflict is a ValidationError too")
	}
	if n := countJobs(t, db); n != 1 {
		t.Fatalf("%d jobs", n)
	}
}

// Options and requests that arrive as JSON by their wire names are checked as given: an
// explicit zero is refused rather than taken for the default, and a key that is no option is
// named.
func TestWireNamedOptionsAreCheckedAsGiven(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	for wire, field := range map[string]string{
		`{"maxAttempts": 0}`:                                 "maxAttempts",
		`{"queue": ""}`:                                      "queue",
		`{"priority": 1.5}`:                                  "priority",
		`{"executionTimeoutMs": 0}`:                          "executionTimeoutMs",
		`{"runAt": "tomorrow"}`:                              "runAt",
		`{"retryPolicy": {"kind": "linear"}}`:                "retryPolicy.kind",
		`{"retryPolicy": {"kind": "fixed", "initialMs": 5}}`: "retryPolicy.initialMs",
		`{"idempotencyKey": ""}`:                             "idempotencyKey",
		`{"colour": "blue"}`:                                 "colour",
	} {
		var opts workhorse.EnqueueOptions
		if err := json.Unmarshal([]byte(wire), &opts); err != nil {
			t.Fatal(err)
		}
		_, err := queue.Enqueue(ctx, "t", nil, &opts)
		var invalid *workhorse.ValidationError
		if !errors.As(err, &invalid) || invalid.Field != field {
			t.Errorf("%s: got %v, want a ValidationError naming %s", wire, err, field)
		}
	}
	var requests []workhorse.EnqueueRequest
	if err := json.Unmarshal([]byte(`[{"type": "t", "payload": 1}, {"type": "t", "payload": 2, "maxAttempts": 0}]`), &requests); err != nil {
		t.Fatal(err)
	}
	_, err := queue.EnqueueMany(ctx, requests)
	var invalid *workhorse.ValidationError
	if !errors.As(err, &invalid) || invalid.Field != "requests[1].maxAttempts" {
		t.Errorf("batch: got %v", err)
	}
	if n := countJobs(t, db); n != 0 {
		t.Fatalf("%d jobs written", n)
	}
	var good workhorse.EnqueueOptions
	if err := json.Unmarshal([]byte(`{"priority": 0, "maxAttempts": 3, "retryPolicy": {"kind": "fixed", "delayMs": 0}, "runAt": "2030-01-01T00:00:00Z"}`), &good); err != nil {
		t.Fatal(err)
	}
	id, err := queue.Enqueue(ctx, "t", nil, &good)
	if err != nil {
		t.Fatal(err)
	}
	job, _ := workhorse.NewAdmin(workhorse.Pgx(db.Pool)).GetJob(ctx, id)
	if job.MaxAttempts != 3 || job.State != workhorse.StateScheduled || !sameJSON(job.RetryPolicy, `{"kind": "fixed", "delayMs": 0}`) {
		t.Fatalf("job %+v", job)
	}
}
