package workhorse_test

import (
	"context"
	"encoding/base64"
	"errors"
	"sync"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

func TestGetJobOfAnUnknownOrMalformedID(t *testing.T) {
	db := testpg.New(t)
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	job, err := admin.GetJob(context.Background(), "01a22858-3d78-7624-95c6-4dc3ae0605a2")
	if job != nil || err != nil {
		t.Fatalf("got %+v, %v", job, err)
	}
	_, err = admin.GetJob(context.Background(), "nope")
	var invalid *workhorse.ValidationError
	if !errors.As(err, &invalid) || invalid.Field != "jobId" {
		t.Fatalf("got %v", err)
	}
}

func TestListJobsPagesNewestFirstWithFilters(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	var ids []string
	for i := 0; i < 5; i++ {
		id, err := queue.Enqueue(ctx, "listed", i, &workhorse.EnqueueOptions{Queue: "list-a"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := queue.Enqueue(ctx, "other", 0, &workhorse.EnqueueOptions{Queue: "list-b"}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := admin.ListJobs(ctx, workhorse.ListJobsFilter{Queue: "list-a", States: []workhorse.JobState{workhorse.StateReady}, Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Items {
			seen = append(seen, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(seen) != 5 || seen[0] != ids[4] || seen[4] != ids[0] {
		t.Fatalf("pages gave %v, want newest first of %v", seen, ids)
	}
	_, err := admin.ListJobs(ctx, workhorse.ListJobsFilter{States: []workhorse.JobState{"done"}})
	var invalid *workhorse.ValidationError
	if !errors.As(err, &invalid) || invalid.Field != "states" {
		t.Fatalf("a bad state: %v", err)
	}
	_, err = admin.ListJobs(ctx, workhorse.ListJobsFilter{Cursor: base64.RawURLEncoding.EncodeToString([]byte("timeline:1"))})
	if !errors.As(err, &invalid) || invalid.Field != "cursor" {
		t.Fatalf("a cursor of another list: %v", err)
	}
}

func TestCancelAJobThatIsNotRunning(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "later", nil, &workhorse.EnqueueOptions{RunAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []workhorse.CancelResult{workhorse.Canceled, workhorse.AlreadyTerminal} {
		if got, err := admin.Cancel(ctx, id, "customer withdrew"); err != nil || got != want {
			t.Fatalf("Cancel: %s, %v; want %s", got, err, want)
		}
	}
	job, err := admin.GetJob(ctx, id)
	if err != nil || job.State != workhorse.StateCanceled || job.Error == nil || job.Error.Name != "Canceled" || job.Error.Message != "customer withdrew" {
		t.Fatalf("job %+v, %v", job, err)
	}
	if got, err := admin.Cancel(ctx, "01a22858-3d78-7624-95c6-4dc3ae0605a2", ""); err != nil || got != workhorse.NotFound {
		t.Fatalf("Cancel of an unknown job: %s, %v", got, err)
	}
}

func TestDeadLettersAndRedrive(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	w, err := workhorse.NewWorker(workhorse.Pgx(db.Pool), workhorse.WorkerOptions{Queues: []string{"dead"}, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var seen sync.Map // payloads run before: their redriven copies succeed
	err = workhorse.Handle(w, "doomed", func(ctx context.Context, job *workhorse.Job, p int) (any, error) {
		if _, again := seen.LoadOrStore(p, true); !again {
			return nil, workhorse.NonRetryable(workhorse.NewError("PaymentDeclined", "declined"))
		}
		return p, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	var failed []string
	for i := 0; i < 3; i++ {
		id, err := queue.Enqueue(ctx, "doomed", i, &workhorse.EnqueueOptions{Queue: "dead"})
		if err != nil {
			t.Fatal(err)
		}
		waitForState(t, admin, id, 10*time.Second, workhorse.StateFailed)
		failed = append(failed, id)
	}
	page, err := admin.ListDeadLetters(ctx, workhorse.ListDeadLettersOptions{DeadLetterFilter: workhorse.DeadLetterFilter{Queue: "dead", ErrorName: "PaymentDeclined"}, Limit: 2})
	if err != nil || len(page.Items) != 2 || page.NextCursor == "" || page.Items[0].ID != failed[2] {
		t.Fatalf("first page %+v, %v", page, err)
	}
	rest, err := admin.ListDeadLetters(ctx, workhorse.ListDeadLettersOptions{Limit: 2, Cursor: page.NextCursor})
	if err != nil || len(rest.Items) != 1 || rest.Items[0].ID != failed[0] || rest.NextCursor != "" {
		t.Fatalf("second page %+v, %v", rest, err)
	}

	again, err := admin.Redrive(ctx, failed[0], workhorse.RedriveOptions{RequestID: "incident-1", ActorOptions: workhorse.ActorOptions{Actor: "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	if repeat, err := admin.Redrive(ctx, failed[0], workhorse.RedriveOptions{RequestID: "incident-1"}); err != nil || repeat != again {
		t.Fatalf("a repeated redrive gave %s, %v; want %s", repeat, err, again)
	}
	redriven := waitForState(t, admin, again, 10*time.Second, workhorse.StateSucceeded)
	if redriven.RedrivenFrom != failed[0] || redriven.CurrentAttempt != 1 {
		t.Fatalf("redriven job %+v", redriven)
	}
	source, _ := admin.GetJob(ctx, failed[0])
	if source.State != workhorse.StateFailed || len(source.RedrivenTo) != 1 || source.RedrivenTo[0] != again {
		t.Fatalf("source %+v", source)
	}

	dry, err := admin.RedriveMany(ctx, workhorse.DeadLetterFilter{Queue: "dead"}, workhorse.RedriveManyOptions{RequestID: "incident-2", DryRun: true})
	if err != nil || len(dry) != 2 || dry[0].NewJobID != "" {
		t.Fatalf("dry run %+v, %v", dry, err)
	}
	done, err := admin.RedriveMany(ctx, workhorse.DeadLetterFilter{Queue: "dead"}, workhorse.RedriveManyOptions{RequestID: "incident-2"})
	if err != nil || len(done) != 2 || done[0].NewJobID == "" {
		t.Fatalf("redrive many %+v, %v", done, err)
	}
}

func TestTimelinePagesThroughTheHistory(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "timed", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, db, workhorse.WorkerOptions{})
	if err := workhorse.Handle(w, "timed", func(ctx context.Context, job *workhorse.Job, _ any) (int, error) {
		if _, err := workhorse.Checkpoint(ctx, job, "one", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return 0, err
		}
		return 2, nil
	}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	waitForState(t, admin, id, 10*time.Second, workhorse.StateSucceeded)
	var kinds []string
	cursor := ""
	for {
		page, err := admin.GetJobTimeline(ctx, id, workhorse.TimelineOptions{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			kinds = append(kinds, e.Source+":"+e.Kind)
			// Events carry the login role of the session that wrote them; attempts none.
			if (e.Source == "event") != (e.LoginRole != "") {
				t.Fatalf("%s:%s has login role %q", e.Source, e.Kind, e.LoginRole)
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	want := "event:enqueued event:claimed event:checkpoint_saved attempt:succeeded event:succeeded"
	if got := join(kinds); got != want {
		t.Fatalf("timeline %s, want %s", got, want)
	}
}

func TestPauseAndResumeAQueue(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	info, err := admin.PauseQueue(ctx, "paused", workhorse.ActorOptions{Actor: "ops", Reason: "provider outage"})
	if err != nil || !info.Paused || info.ChangedBy != "ops" || info.Reason != "provider outage" || info.ChangedAt == nil {
		t.Fatalf("pause: %+v, %v", info, err)
	}
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "p", nil, &workhorse.EnqueueOptions{Queue: "paused"})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, db, workhorse.WorkerOptions{Queues: []string{"paused"}})
	if err := workhorse.Handle(w, "p", func(context.Context, *workhorse.Job, any) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	time.Sleep(300 * time.Millisecond) // several polls of 50 ms
	if job, _ := admin.GetJob(ctx, id); job.State != workhorse.StateReady {
		t.Fatalf("a job of a paused queue is %s", job.State)
	}
	queues, err := admin.ListQueues(ctx)
	if err != nil || len(queues) != 1 || queues[0].Ready != 1 || !queues[0].Paused {
		t.Fatalf("queues %+v, %v", queues, err)
	}
	if _, err := admin.ResumeQueue(ctx, "paused", workhorse.ActorOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForState(t, admin, id, 10*time.Second, workhorse.StateSucceeded)
}
