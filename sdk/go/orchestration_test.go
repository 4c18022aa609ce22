package workhorse_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

func TestDependsOnBlocksAJobUntilItsPrerequisitesEndAndShowsTheirOutcomes(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	ids, err := queue.EnqueueMany(ctx, []workhorse.EnqueueRequest{
		{Type: "extract", Payload: "sales"},
		{Type: "broken", Payload: "stock"},
		{Type: "report", Payload: nil, EnqueueOptions: workhorse.EnqueueOptions{
			DependsOn:          []workhorse.Prerequisite{workhorse.DependOnRequest(0), workhorse.DependOnRequest(1)},
			OnDependencyFailed: workhorse.DependencyRun,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Another transaction names the report by id; its default policy fails it if the report fails.
	mail, err := queue.Enqueue(ctx, "mail", nil, &workhorse.EnqueueOptions{DependsOn: workhorse.DependOnJobs(ids[2])})
	if err != nil {
		t.Fatal(err)
	}
	report, err := admin.GetJob(ctx, ids[2])
	if err != nil {
		t.Fatal(err)
	}
	if report.State != workhorse.StateBlocked || len(report.Dependencies) != 2 || report.Dependencies[0].ID != ids[0] ||
		len(report.WaitingOn) != 2 || report.WaitingOn[1].State != workhorse.StateReady {
		t.Fatalf("report before its prerequisites: %s %+v", report.State, report.JobLineage)
	}

	w := newWorker(t, db, workhorse.WorkerOptions{})
	must(t, workhorse.Handle(w, "extract", func(ctx context.Context, job *workhorse.Job, what string) (string, error) {
		return what + " extracted", nil
	}))
	must(t, workhorse.Handle(w, "broken", func(ctx context.Context, job *workhorse.Job, what string) (any, error) {
		return nil, workhorse.NonRetryable(workhorse.NewError("SourceDown", what+" is down"))
	}))
	must(t, workhorse.Handle(w, "report", func(ctx context.Context, job *workhorse.Job, _ any) ([]workhorse.DependencyOutcome, error) {
		return job.Dependencies(ctx)
	}))
	must(t, workhorse.Handle(w, "mail", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) { return "sent", nil }))
	startWorker(t, w)

	done := waitForState(t, admin, ids[2], 20*time.Second, workhorse.StateSucceeded)
	var outcomes []struct {
		JobID  string
		State  string
		Result any
		Error  *workhorse.ErrorEnvelope
	}
	decode(t, done.Result, &outcomes)
	if len(outcomes) != 2 || outcomes[0].JobID != ids[0] || outcomes[0].State != "succeeded" || outcomes[0].Result != "sales extracted" ||
		outcomes[1].State != "failed" || outcomes[1].Error == nil || outcomes[1].Error.Name != "SourceDown" {
		t.Fatalf("the report saw %s", done.Result)
	}
	if len(done.WaitingOn) != 0 || done.Dependencies[1].State != workhorse.StateFailed {
		t.Fatalf("lineage once done: %+v", done.JobLineage)
	}
	waitForState(t, admin, mail, 20*time.Second, workhorse.StateSucceeded)
}

func TestADependentEndsByItsPolicyWhenAPrerequisiteFails(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	first, err := queue.Enqueue(ctx, "step", nil, nil)
	must(t, err)
	failing, err := queue.Enqueue(ctx, "next", nil, &workhorse.EnqueueOptions{DependsOn: workhorse.DependOnJobs(first)})
	must(t, err)
	canceling, err := queue.Enqueue(ctx, "next", nil, &workhorse.EnqueueOptions{DependsOn: workhorse.DependOnJobs(first), OnDependencyFailed: workhorse.DependencyCancel})
	must(t, err)
	if _, err := admin.Cancel(ctx, first, "not needed"); err != nil {
		t.Fatal(err)
	}
	// A canceled prerequisite: policy "cancel" (the default) for both.
	for _, id := range []string{failing, canceling} {
		job := waitForState(t, admin, id, 5*time.Second, workhorse.StateCanceled)
		if job.Error == nil || job.Error.Name != "DependencyCanceled" {
			t.Fatalf("error %+v", job.Error)
		}
	}
	onCanceledFail, err := queue.Enqueue(ctx, "next", nil, &workhorse.EnqueueOptions{DependsOn: workhorse.DependOnJobs(first), OnDependencyCanceled: workhorse.DependencyFail})
	must(t, err)
	job := waitForState(t, admin, onCanceledFail, 5*time.Second, workhorse.StateFailed)
	if job.Error == nil || job.Error.Name != "DependencyCanceled" {
		t.Fatalf("error %+v", job.Error)
	}
}

func TestDependencyOptionsAreCheckedBeforeAnythingIsWritten(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	existing, err := queue.Enqueue(ctx, "a", nil, nil)
	must(t, err)
	missing := "00000000-0000-4000-8000-000000000001"
	cases := []struct {
		requests []workhorse.EnqueueRequest
		field    string
	}{
		{[]workhorse.EnqueueRequest{{Type: "a", EnqueueOptions: workhorse.EnqueueOptions{DependsOn: []workhorse.Prerequisite{}}}}, "requests[0].dependsOn"},
		{[]workhorse.EnqueueRequest{{Type: "a", EnqueueOptions: workhorse.EnqueueOptions{DependsOn: []workhorse.Prerequisite{workhorse.DependOnRequest(0)}}}}, "requests[0].dependsOn[0]"},
		{[]workhorse.EnqueueRequest{{Type: "a"}, {Type: "b", EnqueueOptions: workhorse.EnqueueOptions{DependsOn: []workhorse.Prerequisite{workhorse.DependOnJob(existing), workhorse.DependOnJob(existing)}}}}, "requests[1].dependsOn[1]"},
		{[]workhorse.EnqueueRequest{{Type: "a", EnqueueOptions: workhorse.EnqueueOptions{DependsOn: workhorse.DependOnJobs("not-a-uuid")}}}, "requests[0].dependsOn[0]"},
		{[]workhorse.EnqueueRequest{{Type: "a", EnqueueOptions: workhorse.EnqueueOptions{OnDependencyFailed: workhorse.DependencyRun}}}, "requests[0].onDependencyFailed"},
		{[]workhorse.EnqueueRequest{{Type: "a", EnqueueOptions: workhorse.EnqueueOptions{DependsOn: workhorse.DependOnJobs(existing), OnDependencyCanceled: "later"}}}, "requests[0].onDependencyCanceled"},
	}
	for _, c := range cases {
		_, err := queue.EnqueueMany(ctx, c.requests)
		var invalid *workhorse.ValidationError
		if !errors.As(err, &invalid) || invalid.Field != c.field {
			t.Fatalf("want a ValidationError on %s, got %v", c.field, err)
		}
	}
	// An id that names no job: the database refuses the whole batch (P1020).
	_, err = queue.EnqueueMany(ctx, []workhorse.EnqueueRequest{{Type: "a"}, {Type: "b", EnqueueOptions: workhorse.EnqueueOptions{DependsOn: workhorse.DependOnJobs(existing, missing)}}})
	var unknown *workhorse.UnknownDependencyError
	var invalid *workhorse.ValidationError
	if !errors.As(err, &unknown) || unknown.JobID != missing || unknown.Field != "requests[1].dependsOn[1]" || !errors.As(err, &invalid) {
		t.Fatalf("want an UnknownDependencyError, got %v", err)
	}
	if n := countJobs(t, db); n != 1 {
		t.Fatalf("%d jobs, want the one enqueued first", n)
	}
}

func TestRunChildParksTheParentAndReplaysItWithTheChildsResult(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	var reserved, runs atomic.Int32
	w := newWorker(t, db, workhorse.WorkerOptions{})
	events := make(chan workhorse.Event, 100)
	w2 := newWorker(t, db, workhorse.WorkerOptions{Queues: []string{"parents"}, OnEvent: func(e workhorse.Event) {
		if e.Name == workhorse.EventJobBlocked {
			events <- e
		}
	}})
	type result struct {
		Charged  string   `json:"charged"`
		Shipped  int      `json:"shipped"`
		Declined string   `json:"declined"`
		Children []string `json:"children"`
	}
	must(t, workhorse.Handle(w2, "order", func(ctx context.Context, job *workhorse.Job, lines []string) (result, error) {
		runs.Add(1)
		if _, err := workhorse.Checkpoint(ctx, job, "reserve", func(context.Context) (bool, error) { reserved.Add(1); return true, nil }); err != nil {
			return result{}, err
		}
		charged, err := workhorse.RunChild[string](ctx, job, "charge", "charge", 42, nil)
		if err != nil {
			return result{}, err
		}
		var declined string
		_, err = workhorse.RunChild[string](ctx, job, "second-charge", "charge", -1, &workhorse.EnqueueOptions{MaxAttempts: 1})
		var failed *workhorse.ChildJobFailedError
		if errors.As(err, &failed) {
			declined = failed.ChildError.Name + " " + string(failed.ChildState)
		} else if err != nil {
			return result{}, err
		}
		specs := make([]workhorse.EnqueueRequest, len(lines))
		for i, line := range lines {
			specs[i] = workhorse.EnqueueRequest{Type: "ship", Payload: line}
		}
		shipped, err := workhorse.RunChildren[int](ctx, job, "ship", specs)
		if err != nil {
			return result{}, err
		}
		out := result{Charged: charged, Declined: declined}
		for _, o := range shipped {
			out.Shipped += o.Result
			out.Children = append(out.Children, o.JobID)
		}
		return out, nil
	}))
	must(t, workhorse.Handle(w, "charge", func(ctx context.Context, job *workhorse.Job, cents int) (string, error) {
		if cents < 0 {
			return "", workhorse.NewError("Declined", "no money")
		}
		return "ch_1", nil
	}))
	must(t, workhorse.Handle(w, "ship", func(ctx context.Context, job *workhorse.Job, line string) (int, error) { return len(line), nil }))
	id, err := queue.Enqueue(ctx, "order", []string{"a", "bb", "ccc"}, &workhorse.EnqueueOptions{Queue: "parents"})
	must(t, err)
	startWorker(t, w2)
	startWorker(t, w)
	if e := <-events; e.JobID != id || e.WaitingFor != "children" {
		t.Fatalf("event %+v", e)
	}
	parent := waitForState(t, admin, id, 20*time.Second, workhorse.StateSucceeded)
	var got result
	decode(t, parent.Result, &got)
	if got.Charged != "ch_1" || got.Shipped != 6 || got.Declined != "Declined failed" || len(got.Children) != 3 {
		t.Fatalf("result %s", parent.Result)
	}
	if reserved.Load() != 1 || runs.Load() != 4 || parent.CurrentAttempt != 1 {
		t.Fatalf("reserve ran %d times, the handler %d times, attempt %d", reserved.Load(), runs.Load(), parent.CurrentAttempt)
	}
	if len(parent.Children) != 5 || parent.Children[0].Key != "charge" || parent.Children[4].Key != "ship" {
		t.Fatalf("children %+v", parent.Children)
	}
	child, err := admin.GetJob(ctx, got.Children[0])
	must(t, err)
	if child.ParentID != id {
		t.Fatalf("the child's parent is %q", child.ParentID)
	}
	// A parent's children, a page at a time, and filtered.
	page, err := admin.ListJobs(ctx, workhorse.ListJobsFilter{ParentID: id, Limit: 2})
	must(t, err)
	next, err := admin.ListJobs(ctx, workhorse.ListJobsFilter{ParentID: id, Limit: 2, Cursor: page.NextCursor})
	must(t, err)
	if len(page.Items) != 2 || page.Items[0].Type != "charge" || len(next.Items) != 2 || next.Items[1].ID != got.Children[1] {
		t.Fatalf("children pages %+v / %+v", page.Items, next.Items)
	}
	failed, err := admin.ListJobs(ctx, workhorse.ListJobsFilter{ParentID: id, States: []workhorse.JobState{workhorse.StateFailed}})
	must(t, err)
	if len(failed.Items) != 1 || failed.Items[0].Type != "charge" {
		t.Fatalf("failed children %+v", failed.Items)
	}
}

func TestRunChildUnderAKeyUsedForOtherChildrenIsAConflict(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	w := newWorker(t, db, workhorse.WorkerOptions{})
	must(t, workhorse.Handle(w, "parent", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) {
		// The payload differs between runs: the replay asks for another child under the same key.
		_, err := workhorse.RunChild[any](ctx, job, "k", "child", time.Now().UnixNano(), nil)
		var conflict *workhorse.ChildJobConflictError
		if errors.As(err, &conflict) {
			return nil, workhorse.NonRetryable(err)
		}
		return nil, err
	}))
	must(t, workhorse.Handle(w, "child", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) { return nil, nil }))
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "parent", nil, nil)
	must(t, err)
	startWorker(t, w)
	job := waitForState(t, admin, id, 20*time.Second, workhorse.StateFailed)
	if job.Error == nil || job.Error.Name != "ChildJobConflictError" {
		t.Fatalf("error %+v", job.Error)
	}
}

func TestWaitForSignalParksTheJobUntilTheSignalArrives(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	type shipment struct {
		TrackingID string `json:"trackingId"`
	}
	w := newWorker(t, db, workhorse.WorkerOptions{})
	must(t, workhorse.Handle(w, "ship", func(ctx context.Context, job *workhorse.Job, _ any) ([]string, error) {
		first, err := workhorse.WaitForSignal[shipment](ctx, job, "shipped", nil)
		if err != nil {
			return nil, err
		}
		second, err := workhorse.WaitForSignal[shipment](ctx, job, "shipped", nil)
		if err != nil {
			return nil, err
		}
		_, err = workhorse.WaitForSignal[any](ctx, job, "never", &workhorse.WaitOptions{Timeout: 300 * time.Millisecond})
		var timedOut *workhorse.SignalTimeoutError
		if !errors.As(err, &timedOut) {
			return nil, err
		}
		return []string{first.TrackingID, second.TrackingID, timedOut.SignalName}, nil
	}))
	id, err := queue.Enqueue(ctx, "ship", nil, nil)
	must(t, err)
	// Sent before the job reached its wait: buffered, and the first wait takes it at once.
	s, err := queue.SendSignal(ctx, id, "shipped", shipment{"T-1"}, &workhorse.SignalOptions{IdempotencyKey: "T-1"})
	if err != nil || s != workhorse.SignalBuffered {
		t.Fatalf("send: %s %v", s, err)
	}
	if s, _ := queue.SendSignal(ctx, id, "shipped", shipment{"T-1"}, &workhorse.SignalOptions{IdempotencyKey: "T-1"}); s != workhorse.SignalDuplicate {
		t.Fatalf("repeat: %s", s)
	}
	startWorker(t, w)
	waitForState(t, admin, id, 20*time.Second, workhorse.StateBlocked)
	// In the caller's transaction: delivered, the job ready again once it commits.
	tx, err := db.Pool.Begin(ctx)
	must(t, err)
	s, err = queue.With(workhorse.Pgx(tx)).SendSignal(ctx, id, "shipped", shipment{"T-2"}, nil)
	if err != nil || s != workhorse.SignalDelivered {
		t.Fatalf("send: %s %v", s, err)
	}
	must(t, tx.Commit(ctx))
	job := waitForState(t, admin, id, 20*time.Second, workhorse.StateSucceeded)
	if !sameJSON(job.Result, `["T-1", "T-2", "never"]`) || job.CurrentAttempt != 1 {
		t.Fatalf("result %s, attempt %d", job.Result, job.CurrentAttempt)
	}
	if s, _ := queue.SendSignal(ctx, id, "shipped", nil, nil); s != workhorse.SignalFinished {
		t.Fatalf("after the end: %s", s)
	}
	if s, _ := queue.SendSignal(ctx, "00000000-0000-4000-8000-000000000001", "shipped", nil, nil); s != workhorse.SignalNotFound {
		t.Fatalf("no such job: %s", s)
	}
	var invalid *workhorse.ValidationError
	if _, err := queue.SendSignal(ctx, id, "", nil, nil); !errors.As(err, &invalid) || invalid.Field != "name" {
		t.Fatalf("empty name: %v", err)
	}
}

func TestWaitForHumanTakesADecisionFromTheListOfOpenWaits(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	w := newWorker(t, db, workhorse.WorkerOptions{})
	must(t, workhorse.Handle(w, "refund", func(ctx context.Context, job *workhorse.Job, cents int) (map[string]any, error) {
		d, err := job.WaitForHuman(ctx, "approve", &workhorse.HumanWaitOptions{Context: map[string]int{"cents": cents}, Choices: []string{"approve", "reject"}})
		if err != nil {
			return nil, err
		}
		return map[string]any{"decision": d.Choice(), "by": d.Actor, "why": d.Reason}, nil
	}))
	must(t, workhorse.Handle(w, "expiring", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) {
		_, err := job.WaitForHuman(ctx, "approve", &workhorse.HumanWaitOptions{Timeout: 200 * time.Millisecond})
		var timedOut *workhorse.HumanWaitTimeoutError
		if errors.As(err, &timedOut) {
			return "timed out", nil
		}
		return "", err
	}))
	var ids []string
	for _, cents := range []int{100, 200, 300} {
		id, err := queue.Enqueue(ctx, "refund", cents, nil)
		must(t, err)
		ids = append(ids, id)
	}
	if s, err := queue.CompleteHumanWait(ctx, ids[0], "approve", "approve", workhorse.DecisionOptions{Actor: "alice"}); err != nil || s != workhorse.HumanWaitNotWaiting {
		t.Fatalf("before the wait: %s %v", s, err)
	}
	expiring, err := queue.Enqueue(ctx, "expiring", nil, nil)
	must(t, err)
	startWorker(t, w)
	for _, id := range ids {
		waitForState(t, admin, id, 20*time.Second, workhorse.StateBlocked)
	}
	page, err := admin.ListHumanWaits(ctx, workhorse.HumanWaitFilter{Name: "approve", Type: "refund", Limit: 2})
	must(t, err)
	rest, err := admin.ListHumanWaits(ctx, workhorse.HumanWaitFilter{Name: "approve", Type: "refund", Limit: 2, Cursor: page.NextCursor})
	must(t, err)
	if len(page.Items) != 2 || len(rest.Items) != 1 || rest.NextCursor != "" || len(page.Items[0].Choices) != 2 {
		t.Fatalf("pages %+v / %+v", page, rest)
	}
	seen := map[string]bool{}
	for _, wait := range append(page.Items, rest.Items...) {
		seen[wait.JobID] = true
	}
	if !seen[ids[0]] || !seen[ids[1]] || !seen[ids[2]] {
		t.Fatalf("listed %v, want %v", seen, ids)
	}

	_, err = queue.CompleteHumanWait(ctx, ids[0], "approve", "maybe", workhorse.DecisionOptions{Actor: "alice"})
	var notAllowed *workhorse.DecisionNotAllowedError
	if !errors.As(err, &notAllowed) || len(notAllowed.Choices) != 2 || notAllowed.Field != "decision" {
		t.Fatalf("a decision outside the choices: %v", err)
	}
	var invalid *workhorse.ValidationError
	if _, err := queue.CompleteHumanWait(ctx, ids[0], "approve", "approve", workhorse.DecisionOptions{}); !errors.As(err, &invalid) || invalid.Field != "actor" {
		t.Fatalf("no actor: %v", err)
	}
	s, err := queue.CompleteHumanWait(ctx, ids[0], "approve", "approve", workhorse.DecisionOptions{Actor: "alice", Reason: "loyal", IdempotencyKey: "k1"})
	if err != nil || s != workhorse.HumanWaitCompleted {
		t.Fatalf("decide: %s %v", s, err)
	}
	if s, _ := queue.CompleteHumanWait(ctx, ids[0], "approve", "approve", workhorse.DecisionOptions{Actor: "alice", IdempotencyKey: "k1"}); s != workhorse.HumanWaitDuplicate {
		t.Fatalf("repeat: %s", s)
	}
	if s, _ := queue.CompleteHumanWait(ctx, ids[0], "approve", "reject", workhorse.DecisionOptions{Actor: "bob"}); s != workhorse.HumanWaitAlreadyDecided {
		t.Fatalf("second decision: %s", s)
	}
	job := waitForState(t, admin, ids[0], 20*time.Second, workhorse.StateSucceeded)
	if !sameJSON(job.Result, `{"decision": "approve", "by": "alice", "why": "loyal"}`) {
		t.Fatalf("result %s", job.Result)
	}
	left, err := admin.ListHumanWaits(ctx, workhorse.HumanWaitFilter{Type: "refund"})
	must(t, err)
	if len(left.Items) != 2 {
		t.Fatalf("%d open waits left, want 2", len(left.Items))
	}
	if job := waitForState(t, admin, expiring, 20*time.Second, workhorse.StateSucceeded); !sameJSON(job.Result, `"timed out"`) {
		t.Fatalf("expiring: %s", job.Result)
	}
}

func TestAWaitWithATimeoutParksTheJobScheduledUntilThen(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	w := newWorker(t, db, workhorse.WorkerOptions{})
	var blocked atomic.Value
	must(t, workhorse.Handle(w, "ship", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) {
		payload, err := workhorse.WaitForSignal[string](ctx, job, "shipped", &workhorse.WaitOptions{Timeout: time.Hour})
		var parked *workhorse.JobBlockedError
		if errors.As(err, &parked) {
			blocked.Store(*parked)
		}
		return payload, err
	}))
	id, err := queue.Enqueue(ctx, "ship", nil, nil)
	must(t, err)
	startWorker(t, w)
	job := waitForState(t, admin, id, 20*time.Second, workhorse.StateScheduled)
	parked, _ := blocked.Load().(workhorse.JobBlockedError)
	if parked.WaitingFor != "signal" || parked.Name != "shipped" || parked.TimeoutAt.Sub(time.Now()) < 50*time.Minute ||
		job.RunAt.Sub(parked.TimeoutAt).Abs() > time.Millisecond || job.WorkerID != "" {
		t.Fatalf("parked %+v; job run at %s, worker %q", parked, job.RunAt, job.WorkerID)
	}
	if s, err := queue.SendSignal(ctx, id, "shipped", "T-7", nil); err != nil || s != workhorse.SignalDelivered {
		t.Fatalf("send: %s %v", s, err)
	}
	if job := waitForState(t, admin, id, 20*time.Second, workhorse.StateSucceeded); !sameJSON(job.Result, `"T-7"`) || job.CurrentAttempt != 1 {
		t.Fatalf("result %s, attempt %d", job.Result, job.CurrentAttempt)
	}
}

// Issue 30.10: what the SDK hands a handler (dependencies, child outcomes, a signal's payload, a
// human decision) can be returned as the job's result, and checkpointed, as it is; and a
// decision after the wait's timeout answers HumanWaitTimedOut (issue 30.5).
func TestWhatAHandlerIsGivenCanBeReturnedAndCheckpointedAsItIs(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	w := newWorker(t, db, workhorse.WorkerOptions{})
	must(t, workhorse.Handle(w, "first", func(ctx context.Context, job *workhorse.Job, _ any) (map[string]bool, error) {
		return map[string]bool{"first": true}, nil
	}))
	must(t, workhorse.Handle(w, "child", func(ctx context.Context, job *workhorse.Job, n int) (int, error) {
		if n < 0 {
			return 0, errors.New("negative")
		}
		return n * 2, nil
	}))
	must(t, workhorse.Handle(w, "all", func(ctx context.Context, job *workhorse.Job, _ any) (map[string]any, error) {
		deps, err := job.Dependencies(ctx)
		if err != nil {
			return nil, err
		}
		kids, err := workhorse.RunChildren[int](ctx, job, "kids", []workhorse.EnqueueRequest{
			{Type: "child", Payload: 1}, {Type: "child", Payload: -1, EnqueueOptions: workhorse.EnqueueOptions{MaxAttempts: 1}},
		})
		if err != nil {
			return nil, err
		}
		signal, err := workhorse.WaitForSignal[json.RawMessage](ctx, job, "go", nil)
		if err != nil {
			return nil, err
		}
		d, err := job.WaitForHuman(ctx, "approve", &workhorse.HumanWaitOptions{Choices: []string{"yes", "no"}})
		if err != nil {
			return nil, err
		}
		again, err := workhorse.Checkpoint(ctx, job, "decision", func(context.Context) (workhorse.HumanDecision, error) { return d, nil })
		if err != nil {
			return nil, err
		}
		return map[string]any{"dependencies": deps, "children": kids, "signal": signal, "decision": d, "again": again}, nil
	}))
	must(t, workhorse.Handle(w, "expiring", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) {
		_, err := job.WaitForHuman(ctx, "approve", &workhorse.HumanWaitOptions{Timeout: 200 * time.Millisecond})
		var timedOut *workhorse.HumanWaitTimeoutError
		if errors.As(err, &timedOut) {
			return "timed out", nil
		}
		return "", err
	}))
	first, err := queue.Enqueue(ctx, "first", nil, nil)
	must(t, err)
	id, err := queue.Enqueue(ctx, "all", nil, &workhorse.EnqueueOptions{DependsOn: []workhorse.Prerequisite{workhorse.DependOnJob(first)}})
	must(t, err)
	expiring, err := queue.Enqueue(ctx, "expiring", nil, nil)
	must(t, err)
	if s, err := queue.SendSignal(ctx, id, "go", map[string]string{"at": "now"}, nil); err != nil || (s != workhorse.SignalDelivered && s != workhorse.SignalBuffered) {
		t.Fatalf("send: %s %v", s, err)
	}
	startWorker(t, w)
	deadline := time.Now().Add(20 * time.Second)
	for {
		page, err := admin.ListHumanWaits(ctx, workhorse.HumanWaitFilter{JobID: id})
		must(t, err)
		if len(page.Items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the human wait never opened")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s, err := queue.CompleteHumanWait(ctx, id, "approve", "yes", workhorse.DecisionOptions{Actor: "alice"}); err != nil || s != workhorse.HumanWaitCompleted {
		t.Fatalf("decide: %s %v", s, err)
	}
	job := waitForState(t, admin, id, 20*time.Second, workhorse.StateSucceeded)
	var result struct {
		Dependencies []struct {
			JobID  string
			State  string
			Result map[string]bool
		}
		Children []struct {
			State  string
			Result int
			Error  *struct{ Message string }
		}
		Signal   map[string]string
		Decision struct {
			Decision  string
			Actor     string
			DecidedAt time.Time
		}
		Again json.RawMessage
	}
	if err := json.Unmarshal(job.Result, &result); err != nil {
		t.Fatalf("result %s: %v", job.Result, err)
	}
	if len(result.Dependencies) != 1 || result.Dependencies[0].JobID != first || !result.Dependencies[0].Result["first"] ||
		len(result.Children) != 2 || result.Children[0].Result != 2 || result.Children[1].State != "failed" ||
		result.Children[1].Error == nil || result.Children[1].Error.Message != "negative" || result.Signal["at"] != "now" ||
		result.Decision.Decision != "yes" || result.Decision.Actor != "alice" || result.Decision.DecidedAt.IsZero() {
		t.Fatalf("result %s", job.Result)
	}
	var decision map[string]any
	must(t, json.Unmarshal(job.Result, &decision))
	if !sameJSON(result.Again, string(mustJSON(t, decision["decision"]))) {
		t.Fatalf("the checkpointed decision %s differs from %v", result.Again, decision["decision"])
	}
	waitForState(t, admin, expiring, 20*time.Second, workhorse.StateSucceeded)
	if s, err := queue.CompleteHumanWait(ctx, expiring, "approve", "late", workhorse.DecisionOptions{Actor: "bob"}); err != nil || s != workhorse.HumanWaitTimedOut {
		t.Fatalf("a decision after the timeout: %s %v", s, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	must(t, err)
	return data
}
