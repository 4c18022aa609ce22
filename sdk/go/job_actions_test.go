package workhorse_test

import (
	"context"
	"errors"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

func TestOperatorActionsOnJobs(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	later := time.Now().Add(time.Hour)
	id, err := queue.Enqueue(ctx, "t", nil, &workhorse.EnqueueOptions{Queue: "go-actions", RunAt: later})
	if err != nil {
		t.Fatal(err)
	}
	priority := 70
	if got, err := admin.Reschedule(ctx, id, workhorse.RescheduleOptions{Priority: &priority}); err != nil || got != "rescheduled" {
		t.Fatalf("Reschedule: %s, %v", got, err)
	}
	if job, err := admin.GetJob(ctx, id); err != nil || job.Priority != 70 {
		t.Fatalf("after Reschedule: %+v, %v", job, err)
	}
	if got, err := admin.RunNow(ctx, id, workhorse.ActorOptions{Actor: "ops", Reason: "now"}); err != nil || got != "ready" {
		t.Fatalf("RunNow: %s, %v", got, err)
	}
	_, err = admin.DeleteJob(ctx, id, workhorse.ActorOptions{})
	var refused *workhorse.JobActionRefusedError
	if !errors.As(err, &refused) || refused.JobID != id || refused.Action != "delete" || refused.State != "ready" {
		t.Fatalf("DeleteJob of a ready job: %v", err)
	}
	bad := 101
	_, err = admin.Reschedule(ctx, id, workhorse.RescheduleOptions{Priority: &bad})
	var invalid *workhorse.ValidationError
	if !errors.As(err, &invalid) || invalid.Field != "priority" {
		t.Fatalf("a bad priority: %v", err)
	}
}

func TestBulkCancelCountsFirstThenPages(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	for i := 0; i < 3; i++ {
		if _, err := queue.Enqueue(ctx, "mail", i, &workhorse.EnqueueOptions{Queue: "go-bulk", RunAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	filter := workhorse.JobActionFilter{Queue: "go-bulk"}
	preview, err := admin.CancelMatching(ctx, filter, workhorse.BulkActionOptions{DryRun: true, Limit: 2})
	if err != nil || !preview.DryRun || preview.Matched != 3 || !preview.More || len(preview.Sample) != 3 || preview.Sample[0].State != "scheduled" {
		t.Fatalf("dry run: %+v, %v", preview, err)
	}
	first, err := admin.CancelMatching(ctx, filter, workhorse.BulkActionOptions{Limit: 2, ActorOptions: workhorse.ActorOptions{Actor: "ops", Reason: "incident"}})
	if err != nil || first.Changed != 2 || first.Outcomes["canceled"] != 2 || !first.More {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	rest, err := admin.CancelMatching(ctx, filter, workhorse.BulkActionOptions{})
	if err != nil || rest.Changed != 1 || rest.More {
		t.Fatalf("last page: %+v, %v", rest, err)
	}
	deleted, err := admin.DeleteMatching(ctx, workhorse.JobActionFilter{Queue: "go-bulk", States: []workhorse.JobState{workhorse.StateCanceled}}, workhorse.BulkActionOptions{})
	if err != nil || deleted.Changed != 3 {
		t.Fatalf("delete: %+v, %v", deleted, err)
	}
	_, err = admin.RunNowMatching(ctx, workhorse.JobActionFilter{JobIDs: []string{"nope"}}, workhorse.BulkActionOptions{})
	var invalid *workhorse.ValidationError
	if !errors.As(err, &invalid) || invalid.Field != "filter.jobIds" {
		t.Fatalf("a bad id: %v", err)
	}
}
