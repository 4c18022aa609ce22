package workhorse_test

import (
	"context"
	"testing"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// The login role beside the actor (issue 30, item 9): an operator login's queue pause, drain
// request and schedule change read back through this SDK's Admin (list_queues_v2,
// list_workers_v2, get_schedule_history_v2) with that login role, which no caller chooses.
func TestOperatorChangesShowTheLoginRoleBesideTheActor(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	opsPool, role := capabilityRolePool(t, db, "operator")
	ops := workhorse.NewAdmin(workhorse.Pgx(opsPool))
	owner := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	var ownerRole string
	must(t, db.Pool.QueryRow(ctx, "SELECT session_user::text").Scan(&ownerRole))

	if _, err := ops.PauseQueue(ctx, "go-attr", workhorse.ActorOptions{Actor: "oncall", Reason: "outage"}); err != nil {
		t.Fatal(err)
	}
	queues, err := owner.ListQueues(ctx)
	must(t, err)
	if len(queues) != 1 || queues[0].ChangedBy != "oncall" || queues[0].LoginRole != role || queues[0].Reason != "outage" {
		t.Fatalf("after the operator's pause: %+v", queues)
	}
	// Another login naming the same actor shows as itself.
	if _, err := owner.ResumeQueue(ctx, "go-attr", workhorse.ActorOptions{Actor: "oncall"}); err != nil {
		t.Fatal(err)
	}
	if queues, err = ops.ListQueues(ctx); err != nil || queues[0].LoginRole != ownerRole || queues[0].Paused {
		t.Fatalf("after the owner's resume: %+v, %v", queues, err)
	}

	info := `{"host": "h", "pid": 1, "queues": ["q"], "concurrency": 1, "version": "v", "startedAt": "2026-12-01T00:00:00Z", "periodMs": 60000}`
	_, err = db.Pool.Exec(ctx, "SELECT * FROM workhorse.report_worker_v2('go-attr-w', $1::jsonb, 0, NULL)", info)
	must(t, err)
	if got, err := ops.DrainWorker(ctx, "go-attr-w", workhorse.ActorOptions{Actor: "deploy", Reason: "maintenance"}); err != nil || got != workhorse.DrainRequested {
		t.Fatalf("drain: %s, %v", got, err)
	}
	workers, err := owner.ListWorkers(ctx)
	must(t, err)
	if len(workers) != 1 || workers[0].DrainRequestedBy != "deploy" || workers[0].DrainLoginRole != role || workers[0].DrainReason != "maintenance" {
		t.Fatalf("workers: %+v", workers)
	}

	_, err = workhorse.NewQueue(workhorse.Pgx(db.Pool)).SyncSchedules(ctx, "go-attr", []workhorse.ScheduleDefinition{{Key: "nightly", Type: "go.report", Cron: "0 6 * * *"}})
	must(t, err)
	if _, err := ops.PauseSchedule(ctx, "go-attr", "nightly", workhorse.ActorOptions{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	history, err := ops.ScheduleHistory(ctx, "go-attr", "nightly", 10)
	must(t, err)
	if len(history) != 2 || history[0].Change != "paused" || history[0].Actor != "alice" || history[0].LoginRole != role ||
		history[1].Change != "created" || history[1].LoginRole != ownerRole {
		t.Fatalf("history: %+v", history)
	}
}
