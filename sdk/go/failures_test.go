package workhorse_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// runOne enqueues one job of a fresh type for handler and waits until it is terminal.
func runOne[P, R any](t *testing.T, payload any, opts *workhorse.EnqueueOptions, handler func(context.Context, *workhorse.Job, P) (R, error)) (*workhorse.JobSnapshot, *testpg.DB, *events) {
	t.Helper()
	db := testpg.New(t)
	var seen events
	w := newWorker(t, db, workhorse.WorkerOptions{OnEvent: seen.add})
	if err := workhorse.Handle(w, "one", handler); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(context.Background(), "one", payload, opts)
	if err != nil {
		t.Fatal(err)
	}
	job := waitForState(t, workhorse.NewAdmin(workhorse.Pgx(db.Pool)), id, 20*time.Second, workhorse.StateSucceeded, workhorse.StateFailed, workhorse.StateCanceled)
	return job, db, &seen
}

func attempts(t *testing.T, db *testpg.DB, jobID string) string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), "SELECT attempt || ':' || outcome FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id", jobID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return join(out)
}

func TestRetriesUntilMaxAttemptsThenFailsWithTheLastEnvelope(t *testing.T) {
	policy := workhorse.FixedRetry(0)
	job, db, seen := runOne(t, 0, &workhorse.EnqueueOptions{MaxAttempts: 3, RetryPolicy: &policy}, func(_ context.Context, job *workhorse.Job, _ int) (any, error) {
		return nil, workhorse.NewError("PaymentDeclined", fmt.Sprintf("declined at attempt %d", job.Attempt))
	})
	if job.State != workhorse.StateFailed || job.CurrentAttempt != 3 {
		t.Fatalf("job %+v", job)
	}
	if job.Error.Name != "PaymentDeclined" || job.Error.Message != "declined at attempt 3" || !strings.Contains(job.Error.Stack, "failures_test.go") {
		t.Fatalf("envelope %+v", job.Error)
	}
	if got := attempts(t, db, job.ID); got != "1:failed 2:failed 3:failed" {
		t.Fatalf("attempts %s", got)
	}
	if e := seen.find(workhorse.EventJobRetryScheduled, job.ID); e == nil || e.Envelope.Name != "PaymentDeclined" {
		t.Fatalf("retry event %+v", e)
	}
	if e := seen.find(workhorse.EventJobFailed, job.ID); e == nil || e.Envelope.Message != "declined at attempt 3" {
		t.Fatalf("failed event %+v", e)
	}
}

func TestAPlainErrorIsNamedErrorAndWrappingKeepsTheName(t *testing.T) {
	job, _, _ := runOne(t, 0, &workhorse.EnqueueOptions{MaxAttempts: 1}, func(context.Context, *workhorse.Job, int) (any, error) {
		return nil, errors.New("plain")
	})
	if job.Error.Name != "Error" || job.Error.Message != "plain" || job.Error.Stack != "" {
		t.Fatalf("envelope %+v", job.Error)
	}
	job, _, _ = runOne(t, 0, &workhorse.EnqueueOptions{MaxAttempts: 1}, func(context.Context, *workhorse.Job, int) (any, error) {
		return nil, fmt.Errorf("charging: %w", workhorse.NewError("PaymentDeclined", "declined"))
	})
	if job.Error.Name != "PaymentDeclined" || job.Error.Message != "charging: declined" {
		t.Fatalf("envelope %+v", job.Error)
	}
}

func TestNonRetryableFailsAtOnce(t *testing.T) {
	job, db, _ := runOne(t, 0, &workhorse.EnqueueOptions{MaxAttempts: 5}, func(context.Context, *workhorse.Job, int) (any, error) {
		return nil, workhorse.NonRetryable(workhorse.NewError("AccountMissing", "account 7 does not exist"))
	})
	if job.State != workhorse.StateFailed || job.CurrentAttempt != 1 || job.Error.Name != "AccountMissing" || job.Error.Message != "account 7 does not exist" {
		t.Fatalf("job %+v, error %+v", job, job.Error)
	}
	if got := attempts(t, db, job.ID); got != "1:failed" {
		t.Fatalf("attempts %s", got)
	}
}

func TestRetryAfterChoosesTheDelay(t *testing.T) {
	job, db, seen := runOne(t, 0, nil, func(_ context.Context, job *workhorse.Job, _ int) (int, error) {
		if job.Attempt == 1 {
			return 0, workhorse.RetryAfter(errors.New("rate limited"), 300*time.Millisecond)
		}
		return job.Attempt, nil
	})
	if job.State != workhorse.StateSucceeded || job.CurrentAttempt != 2 {
		t.Fatalf("job %+v", job)
	}
	retry := seen.find(workhorse.EventJobRetryScheduled, job.ID)
	if retry == nil || retry.Delay != 300*time.Millisecond {
		t.Fatalf("retry event %+v", retry)
	}
	var source string
	err := db.Pool.QueryRow(context.Background(), "SELECT data ->> 'delaySource' FROM workhorse.job_event WHERE job_id = $1 AND kind = 'retry_scheduled'", job.ID).Scan(&source)
	if err != nil || source != "explicit" {
		t.Fatalf("delay source %q, %v", source, err)
	}
}

func TestAHandlerRetryPolicyAppliesToJobsWithoutTheirOwn(t *testing.T) {
	db := testpg.New(t)
	var seen events
	w := newWorker(t, db, workhorse.WorkerOptions{OnEvent: seen.add})
	policy := workhorse.FixedRetry(250 * time.Millisecond)
	if err := workhorse.Handle(w, "flaky", func(_ context.Context, job *workhorse.Job, _ any) (int, error) {
		if job.Attempt == 1 {
			return 0, errors.New("flaked")
		}
		return job.Attempt, nil
	}, workhorse.HandlerOptions{Retry: &policy}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(context.Background(), "flaky", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitForState(t, workhorse.NewAdmin(workhorse.Pgx(db.Pool)), id, 10*time.Second, workhorse.StateSucceeded)
	if e := seen.find(workhorse.EventJobRetryScheduled, id); e == nil || e.Delay != 250*time.Millisecond {
		t.Fatalf("retry event %+v", e)
	}
}

func TestAPanicFailsTheAttempt(t *testing.T) {
	job, _, _ := runOne(t, 0, &workhorse.EnqueueOptions{MaxAttempts: 1}, func(context.Context, *workhorse.Job, int) (any, error) {
		var m map[string]int
		m["boom"]++
		return nil, nil
	})
	if job.State != workhorse.StateFailed || job.Error.Name != "Panic" || !strings.Contains(job.Error.Message, "nil map") || !strings.Contains(job.Error.Stack, "failures_test.go") {
		t.Fatalf("job %+v, error %+v", job, job.Error)
	}
}

func TestAResultThatIsNotJSONFailsTheAttempt(t *testing.T) {
	job, _, _ := runOne(t, 0, &workhorse.EnqueueOptions{MaxAttempts: 1}, func(context.Context, *workhorse.Job, int) (any, error) {
		return func() {}, nil
	})
	if job.State != workhorse.StateFailed || job.Error.Name != "WorkhorseValidationError" || !strings.HasPrefix(job.Error.Message, "result: is not JSON") {
		t.Fatalf("job %+v, error %+v", job, job.Error)
	}
}

// Every attempt would fail the same way: the first one fails the job, with the details (the
// job keeps its default 25 attempts).
func TestAPayloadThatDoesNotDecodeFailsTheJobAtOnce(t *testing.T) {
	job, db, _ := runOne(t, "not an object", nil, func(context.Context, *workhorse.Job, struct{ A int }) (any, error) {
		return nil, nil
	})
	if job.State != workhorse.StateFailed || job.CurrentAttempt != 1 || job.MaxAttempts != 25 || job.Error.Name != "PayloadDecodeError" ||
		!strings.Contains(job.Error.Message, "does not decode into struct { A int }") || !strings.Contains(job.Error.Message, "cannot unmarshal string") {
		t.Fatalf("job %+v, error %+v", job, job.Error)
	}
	if got := attempts(t, db, job.ID); got != "1:failed" {
		t.Fatalf("attempts %s", got)
	}
}

func TestAnExecutionTimeoutCancelsTheContextAndClosesTheAttemptAsTimeout(t *testing.T) {
	causes := make(chan error, 2)
	db := testpg.New(t)
	// No maintenance tick during the test: on a busy machine a tick could close the attempt by
	// the server's clock (error ExecutionTimeout) before the handler's report arrives.
	w := newWorker(t, db, workhorse.WorkerOptions{Tick: 10 * time.Minute})
	must(t, workhorse.Handle(w, "one", func(ctx context.Context, job *workhorse.Job, _ int) (any, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	}))
	startWorker(t, w)
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(context.Background(), "one", 0, &workhorse.EnqueueOptions{MaxAttempts: 1, ExecutionTimeout: time.Second})
	must(t, err)
	job := waitForState(t, workhorse.NewAdmin(workhorse.Pgx(db.Pool)), id, 20*time.Second, workhorse.StateFailed)
	var timeout *workhorse.ExecutionTimeoutError
	if err := <-causes; !errors.As(err, &timeout) || timeout.Timeout != time.Second {
		t.Fatalf("cause %v", err)
	}
	if job.State != workhorse.StateFailed || job.Error.Name != "ExecutionTimeoutError" {
		t.Fatalf("job %+v, error %+v", job, job.Error)
	}
	if got := attempts(t, db, job.ID); got != "1:timeout" {
		t.Fatalf("attempts %s", got)
	}
}

func TestProgressIsVisibleAndKept(t *testing.T) {
	job, _, _ := runOne(t, 0, nil, func(ctx context.Context, job *workhorse.Job, _ int) (any, error) {
		if err := job.SetProgress(ctx, map[string]int{"done": 40, "total": 100}); err != nil {
			return nil, err
		}
		return nil, job.SetProgress(ctx, map[string]int{"done": 100, "total": 100})
	})
	var progress map[string]int
	if err := json.Unmarshal(job.Progress, &progress); err != nil || progress["done"] != 100 {
		t.Fatalf("progress %s", job.Progress)
	}
}

func TestErrorTextIsMadeStorable(t *testing.T) {
	huge := strings.Repeat("é", 100_000) // 200,000 bytes
	job, _, _ := runOne(t, 0, &workhorse.EnqueueOptions{MaxAttempts: 1}, func(context.Context, *workhorse.Job, int) (any, error) {
		return nil, workhorse.NewError("Bad\x00Name", "nul \x00 and invalid \xff utf-8, then "+huge)
	})
	if job.State != workhorse.StateFailed || job.Error.Name != "Bad\uFFFDName" {
		t.Fatalf("job %+v, error name %q", job, job.Error.Name)
	}
	// The database bounds the stored message (workhorse.bounded_error): 32,768 characters kept,
	// and the cut says so, as for every SDK.
	sent := "nul \uFFFD and invalid \uFFFD utf-8, then " + huge
	want := string([]rune(sent)[:32768]) + fmt.Sprintf("… [truncated: 32768 of %d characters kept]", utf8.RuneCountInString(sent))
	if job.Error.Message != want || !utf8.ValidString(job.Error.Message) {
		t.Fatalf("message of %d bytes: %.60q", len(job.Error.Message), job.Error.Message)
	}
}
