package workhorse_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// A producer reads the jobs its login role enqueued, and nothing of any other.
func TestQueueGetJobReadsOnlyTheProducersOwnJobs(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	mine, _ := capabilityRolePool(t, db, "producer")
	other, _ := capabilityRolePool(t, db, "producer")
	producer := workhorse.NewQueue(workhorse.Pgx(mine))
	id, err := producer.Enqueue(ctx, "report.build", map[string]string{"month": "2030-01"}, &workhorse.EnqueueOptions{Queue: "reports"})
	must(t, err)
	job, err := producer.GetJob(ctx, id)
	must(t, err)
	if job == nil || job.ID != id || job.State != workhorse.StateReady || job.Queue != "reports" || !sameJSON(job.Payload, `{"month":"2030-01"}`) {
		t.Fatalf("own job: %+v", job)
	}
	foreign, err := workhorse.NewQueue(workhorse.Pgx(other)).GetJob(ctx, id)
	if foreign != nil || err != nil {
		t.Fatalf("another role's job: %+v, %v", foreign, err)
	}
	unknown, err := producer.GetJob(ctx, "01a22858-3d78-7624-95c6-4dc3ae0605a2")
	if unknown != nil || err != nil {
		t.Fatalf("an unknown id: %+v, %v", unknown, err)
	}
	_, err = producer.GetJob(ctx, "nope")
	var invalid *workhorse.ValidationError
	if !errors.As(err, &invalid) || invalid.Field != "jobId" {
		t.Fatalf("a malformed id: %v", err)
	}
}

// Checkpoints, signals and waits of one job, and the queue's activity once it finished.
func TestAdminReadsAJobsCheckpointsSignalsWaitsAndTheQueueActivity(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	started := time.Now().Add(-time.Minute)
	w := newWorker(t, db, workhorse.WorkerOptions{Queues: []string{"reads"}})
	must(t, workhorse.Handle(w, "order.ship", func(ctx context.Context, job *workhorse.Job, orderID string) (string, error) {
		label, err := workhorse.Checkpoint(ctx, job, "label", func(context.Context) (string, error) { return "L-" + orderID, nil })
		if err != nil {
			return "", err
		}
		tracking, err := workhorse.WaitForSignal[string](ctx, job, "shipped", &workhorse.WaitOptions{Timeout: time.Hour})
		return label + " " + tracking, err
	}))
	startWorker(t, w)
	id, err := queue.Enqueue(ctx, "order.ship", "o-1", &workhorse.EnqueueOptions{Queue: "reads"})
	must(t, err)
	waitForState(t, admin, id, 20*time.Second, workhorse.StateScheduled, workhorse.StateBlocked)
	waits, err := admin.ListJobWaits(ctx, id, workhorse.JobWaitsOptions{})
	must(t, err)
	if len(waits) != 1 || waits[0].Kind != "signal" || waits[0].Name != "shipped" || waits[0].Status != "open" || waits[0].TimeoutAt == nil {
		t.Fatalf("open waits: %+v", waits)
	}
	_, err = queue.SendSignal(ctx, id, "shipped", "T-1", nil)
	must(t, err)
	job := waitForState(t, admin, id, 20*time.Second, workhorse.StateSucceeded)
	if !sameJSON(job.Result, `"L-o-1 T-1"`) {
		t.Fatalf("result %s", job.Result)
	}

	checkpoints, err := admin.ListCheckpoints(ctx, id)
	must(t, err)
	if len(checkpoints) != 1 || checkpoints[0].Name != "label" || !sameJSON(checkpoints[0].Value, `"L-o-1"`) || checkpoints[0].Attempt != 1 || checkpoints[0].WorkerID != w.ID() {
		t.Fatalf("checkpoints: %+v", checkpoints)
	}
	signals, err := admin.ListJobSignals(ctx, id, workhorse.JobWaitsOptions{Limit: 10})
	must(t, err)
	if len(signals) != 1 || signals[0].Name != "shipped" || signals[0].Status != "consumed" || !sameJSON(signals[0].Payload, `"T-1"`) ||
		signals[0].WaitSeq == nil || *signals[0].WaitSeq != 1 {
		t.Fatalf("signals: %+v", signals)
	}
	waits, err = admin.ListJobWaits(ctx, id, workhorse.JobWaitsOptions{})
	must(t, err)
	if len(waits) != 1 || waits[0].Status != "delivered" || waits[0].SignalID != signals[0].ID || waits[0].ResolvedAt == nil {
		t.Fatalf("answered waits: %+v", waits)
	}
	activity, err := admin.QueueActivity(ctx, workhorse.QueueActivityOptions{Since: started, Bucket: time.Hour})
	must(t, err)
	if len(activity) != 1 || activity[0].Queue != "reads" || activity[0].Succeeded != 1 || activity[0].Failed != 0 {
		t.Fatalf("activity: %+v", activity)
	}

	// The server checks the input and names the field.
	var invalid *workhorse.ValidationError
	if _, err := admin.ListJobSignals(ctx, id, workhorse.JobWaitsOptions{Limit: 1001}); !errors.As(err, &invalid) || invalid.Field != "limit" {
		t.Fatalf("a limit out of range: %v", err)
	}
	if _, err := admin.QueueActivity(ctx, workhorse.QueueActivityOptions{Since: started}); !errors.As(err, &invalid) || invalid.Field != "bucketSeconds" {
		t.Fatalf("no bucket: %v", err)
	}
	if _, err := admin.QueueActivity(ctx, workhorse.QueueActivityOptions{Since: time.Now().AddDate(0, -2, 0), Bucket: time.Minute}); !errors.As(err, &invalid) || invalid.Field != "since" {
		t.Fatalf("a window too long ago: %v", err)
	}
	if _, err := admin.ListCheckpoints(ctx, "nope"); !errors.As(err, &invalid) || invalid.Field != "jobId" {
		t.Fatalf("a malformed id: %v", err)
	}
}

// Health, retention and the operator changes they leave, as the TypeScript Admin offers them.
func TestAdminHealthRetentionAndOperatorChanges(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	_, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "waiting", nil, &workhorse.EnqueueOptions{Queue: "health"})
	must(t, err)

	// A ready job and no worker: ready_without_workers warns by default; with its warn level
	// set to never it does not.
	report, err := admin.Health(ctx, workhorse.HealthThresholds{})
	must(t, err)
	if report.Status == "ok" || !hasReason(report, "ready_without_workers") || report.CheckedAt.IsZero() {
		t.Fatalf("health: %+v", report)
	}
	var queue *workhorse.QueueHealth
	for i := range report.Queues {
		if report.Queues[i].Queue == "health" {
			queue = &report.Queues[i]
		}
	}
	if queue == nil || queue.Ready != 1 {
		t.Fatalf("queues: %+v", report.Queues)
	}
	never := math.Inf(1)
	report, err = admin.Health(ctx, workhorse.HealthThresholds{ReadyWithoutWorkers: &workhorse.ThresholdPair{Warn: &never}})
	must(t, err)
	if hasReason(report, "ready_without_workers") {
		t.Fatalf("with warn never: %+v", report.Reasons)
	}
	negative := -1.0
	var invalid *workhorse.ValidationError
	_, err = admin.Health(ctx, workhorse.HealthThresholds{OldestReadyMs: &workhorse.ThresholdPair{Critical: &negative}})
	if !errors.As(err, &invalid) || invalid.Field != "thresholds.oldestReadyMs.critical" {
		t.Fatalf("a negative threshold: %v", err)
	}

	days, keep := 3, 2*time.Hour
	must(t, admin.SetRetention(ctx, workhorse.RetentionSettings{JobEventDays: &days, FinishedJob: &keep}, "alice"))
	status, err := admin.RetentionStatus(ctx)
	must(t, err)
	if !status.Policy.Enabled || status.Policy.JobEventDays != 3 || status.Policy.AttemptHistoryDays != 14 || status.Policy.FinishedJobMs != keep.Milliseconds() ||
		status.Policy.ChangedBy != "alice" || status.Policy.LoginRole == "" || status.Policy.ChangedAt == nil {
		t.Fatalf("retention status: %+v", status.Policy)
	}
	run, err := admin.RunRetention(ctx, 0)
	must(t, err)
	if run.Skipped || run.More {
		t.Fatalf("retention run: %+v", run)
	}
	if _, err := admin.RunRetention(ctx, 2_000_000); !errors.As(err, &invalid) || invalid.Field != "budget" {
		t.Fatalf("a budget out of range: %v", err)
	}
	zero := 0
	if err := admin.SetRetention(ctx, workhorse.RetentionSettings{AttemptHistoryDays: &zero}, ""); !errors.As(err, &invalid) || invalid.Field != "attemptHistoryDays" {
		t.Fatalf("a setting out of range: %v", err)
	}

	_, err = admin.PauseQueue(ctx, "health", workhorse.ActorOptions{Actor: "bob", Reason: "incident"})
	must(t, err)
	changes, err := admin.ListOperatorChanges(ctx, workhorse.OperatorChangeFilter{})
	must(t, err)
	if len(changes) != 2 || changes[0].Kind != "queue_paused" || changes[0].Subject != "health" || changes[0].Actor != "bob" || changes[0].Reason != "incident" ||
		changes[1].Kind != "retention_set" || changes[1].Actor != "alice" || !sameJSON(changes[1].Detail, `{"jobEventDays": 3, "finishedJobMs": 7200000}`) {
		t.Fatalf("changes: %+v", changes)
	}
	older, err := admin.ListOperatorChanges(ctx, workhorse.OperatorChangeFilter{BeforeID: changes[0].ID, Limit: 5})
	must(t, err)
	if len(older) != 1 || older[0].ID != changes[1].ID {
		t.Fatalf("the page before %s: %+v", changes[0].ID, older)
	}
	if _, err := admin.ListOperatorChanges(ctx, workhorse.OperatorChangeFilter{Kind: "queue_deleted"}); !errors.As(err, &invalid) || invalid.Field != "kind" {
		t.Fatalf("an unknown kind: %v", err)
	}
	if _, err := admin.ListOperatorChanges(ctx, workhorse.OperatorChangeFilter{BeforeID: "x1"}); !errors.As(err, &invalid) || invalid.Field != "beforeId" {
		t.Fatalf("a malformed id: %v", err)
	}
}

func hasReason(r *workhorse.HealthReport, code string) bool {
	for _, reason := range r.Reasons {
		if reason.Code == code {
			return true
		}
	}
	return false
}

// A worker tells the server its handlers' retry policies when it starts, so the attempts the
// server closes itself (a lease that ran out) follow them too.
func TestAWorkerRegistersItsHandlersRetryPolicies(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	w := newWorker(t, db, workhorse.WorkerOptions{Queues: []string{"a", "b"}})
	policy := workhorse.FixedRetry(7 * time.Second)
	noop := func(context.Context, *workhorse.Job, any) (any, error) { return nil, nil }
	must(t, workhorse.Handle(w, "with.policy", noop, workhorse.HandlerOptions{Retry: &policy}))
	must(t, workhorse.Handle(w, "without", noop))
	startWorker(t, w)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := db.Pool.Query(ctx, "SELECT queue || ' ' || type || ' ' || coalesce(retry_policy::text, 'none') || ' ' || worker_id FROM workhorse.handler_policy ORDER BY 1")
		must(t, err)
		var got []string
		for rows.Next() {
			var s string
			must(t, rows.Scan(&s))
			got = append(got, s)
		}
		rows.Close()
		if len(got) == 4 {
			want := []string{
				`a with.policy {"kind": "fixed", "delayMs": 7000} ` + w.ID(), "a without none " + w.ID(),
				`b with.policy {"kind": "fixed", "delayMs": 7000} ` + w.ID(), "b without none " + w.ID(),
			}
			if join(got) != join(want) {
				t.Fatalf("handler policies %q, want %q", got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("handler policies %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An operator role decides a human wait through Admin, as a producer does through Queue.
func TestAdminCompletesAHumanWaitWithTheOperatorsRights(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	operator, _ := capabilityRolePool(t, db, "operator")
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	w := newWorker(t, db, workhorse.WorkerOptions{})
	must(t, workhorse.Handle(w, "refund", func(ctx context.Context, job *workhorse.Job, _ any) (string, error) {
		d, err := job.WaitForHuman(ctx, "approve", &workhorse.HumanWaitOptions{Choices: []string{"yes", "no"}})
		return d.Choice() + " by " + d.Actor, err
	}))
	startWorker(t, w)
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "refund", nil, nil)
	must(t, err)
	waitForState(t, admin, id, 20*time.Second, workhorse.StateBlocked)
	s, err := workhorse.NewAdmin(workhorse.Pgx(operator)).CompleteHumanWait(ctx, id, "approve", "yes", workhorse.DecisionOptions{Actor: "carol"})
	if err != nil || s != workhorse.HumanWaitCompleted {
		t.Fatalf("decision: %s, %v", s, err)
	}
	if job := waitForState(t, admin, id, 20*time.Second, workhorse.StateSucceeded); !sameJSON(job.Result, `"yes by carol"`) {
		t.Fatalf("result %s", job.Result)
	}
}
