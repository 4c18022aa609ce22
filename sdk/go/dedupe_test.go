package workhorse_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

type dedupeJob struct {
	ID      string
	Payload string
	State   string
}

func dedupeJobs(t *testing.T, db *testpg.DB, queue string) []dedupeJob {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		`SELECT j.id::text, j.payload::text, r.state FROM workhorse.job j JOIN workhorse.job_runtime r ON r.job_id = j.id
		 WHERE j.queue = $1 ORDER BY j.seq`, queue)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var jobs []dedupeJob
	for rows.Next() {
		var j dedupeJob
		if err := rows.Scan(&j.ID, &j.Payload, &j.State); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

func TestEnqueueDedupedThrottleAndDebounce(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))

	throttle := &workhorse.EnqueueOptions{Queue: "go-throttle", Dedupe: &workhorse.Dedupe{Key: "user-1", Window: time.Minute, Mode: workhorse.DedupeThrottle}}
	first, err := queue.EnqueueDeduped(ctx, "report.send", map[string]int{"n": 1}, throttle)
	if err != nil {
		t.Fatal(err)
	}
	second, err := queue.EnqueueDeduped(ctx, "report.send", map[string]int{"n": 2}, throttle)
	if err != nil {
		t.Fatal(err)
	}
	if first.Outcome != workhorse.OutcomeCreated || second != (workhorse.EnqueueResult{JobID: first.JobID, Outcome: workhorse.OutcomeThrottled}) {
		t.Fatalf("throttle: %+v then %+v", first, second)
	}
	if jobs := dedupeJobs(t, db, "go-throttle"); len(jobs) != 1 || jobs[0].Payload != `{"n": 1}` {
		t.Fatalf("throttle kept %+v", jobs)
	}
	// Enqueue takes the option too and answers the id.
	if id, err := queue.Enqueue(ctx, "report.send", nil, throttle); err != nil || id != first.JobID {
		t.Fatalf("Enqueue with a throttle: %q, %v", id, err)
	}

	debounce := &workhorse.EnqueueOptions{Queue: "go-debounce", Dedupe: &workhorse.Dedupe{Key: "doc-1", Window: 5 * time.Second, Mode: workhorse.DedupeDebounce}}
	a, err := queue.EnqueueDeduped(ctx, "search.reindex", map[string]int{"v": 1}, debounce)
	if err != nil {
		t.Fatal(err)
	}
	b, err := queue.EnqueueDeduped(ctx, "search.reindex", map[string]int{"v": 2}, debounce)
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome != workhorse.OutcomeCreated || b != (workhorse.EnqueueResult{JobID: a.JobID, Outcome: workhorse.OutcomeDebounced}) {
		t.Fatalf("debounce: %+v then %+v", a, b)
	}
	if jobs := dedupeJobs(t, db, "go-debounce"); len(jobs) != 1 || jobs[0].Payload != `{"v": 2}` || jobs[0].State != "scheduled" {
		t.Fatalf("debounce left %+v", jobs)
	}
}

func TestEnqueueDedupedRollsBackWithTheTransaction(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	opts := &workhorse.EnqueueOptions{Queue: "go-tx", Dedupe: &workhorse.Dedupe{Key: "tx", Window: time.Minute, Mode: workhorse.DedupeThrottle}}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queue.With(workhorse.Pgx(tx)).EnqueueDeduped(ctx, "t", nil, opts); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := queue.EnqueueDeduped(ctx, "t", nil, opts)
	if err != nil || res.Outcome != workhorse.OutcomeCreated {
		t.Fatalf("after the rollback: %+v, %v", res, err)
	}
}

func TestEnqueueDedupedConcurrentDebounceMakesOneJob(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	opts := &workhorse.EnqueueOptions{Queue: "go-race", Dedupe: &workhorse.Dedupe{Key: "race", Window: time.Minute, Mode: workhorse.DedupeDebounce}}
	var mu sync.Mutex
	var results []workhorse.EnqueueResult
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for n := 0; n < 10; n++ {
				res, err := queue.EnqueueDeduped(ctx, "t", map[string]any{"from": g, "n": n}, opts)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				results = append(results, res)
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	jobs := dedupeJobs(t, db, "go-race")
	if len(jobs) != 1 || len(results) != 40 {
		t.Fatalf("%d jobs, %d results", len(jobs), len(results))
	}
	created := 0
	for _, r := range results {
		if r.JobID != jobs[0].ID {
			t.Fatalf("answered %s, the job is %s", r.JobID, jobs[0].ID)
		}
		if r.Outcome == workhorse.OutcomeCreated {
			created++
		}
	}
	var last map[string]int
	_ = json.Unmarshal([]byte(jobs[0].Payload), &last)
	if created != 1 || last["n"] != 9 {
		t.Fatalf("%d created; payload %s (the last call of one goroutine expected)", created, jobs[0].Payload)
	}
}

func TestEnqueueDedupedBadOptionsNameTheField(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	cases := []struct {
		dedupe workhorse.Dedupe
		idem   string
		field  string
	}{
		{workhorse.Dedupe{Key: "", Window: time.Second, Mode: workhorse.DedupeThrottle}, "", "dedupe.key"},
		{workhorse.Dedupe{Key: "k", Window: 99 * time.Millisecond, Mode: workhorse.DedupeThrottle}, "", "dedupe.windowMs"},
		{workhorse.Dedupe{Key: "k", Window: time.Second + time.Microsecond, Mode: workhorse.DedupeThrottle}, "", "dedupe.windowMs"},
		{workhorse.Dedupe{Key: "k", Window: time.Second, Mode: "later"}, "", "dedupe.mode"},
		{workhorse.Dedupe{Key: "k", Window: time.Second, Mode: workhorse.DedupeThrottle, Replace: workhorse.ReplacePayload}, "", "dedupe.replace"},
		{workhorse.Dedupe{Key: "k", Window: time.Second, Mode: workhorse.DedupeThrottle}, "i", "dedupe"},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			d := c.dedupe
			_, err := queue.EnqueueDeduped(ctx, "t", nil, &workhorse.EnqueueOptions{Queue: "go-bad", Dedupe: &d, IdempotencyKey: c.idem})
			var v *workhorse.ValidationError
			if !errors.As(err, &v) || v.Field != c.field {
				t.Fatalf("want a ValidationError naming %s, got %v", c.field, err)
			}
		})
	}
	if jobs := dedupeJobs(t, db, "go-bad"); len(jobs) != 0 {
		t.Fatalf("written: %+v", jobs)
	}
}
