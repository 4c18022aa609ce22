package workhorse_test

import (
	"context"
	"errors"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

type resize struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

func (resize) Kind() string { return "image.resize" }

type thumbnail struct {
	Image string `json:"image"`
}

func (thumbnail) Kind() string { return "image.thumbnail" }

// A typed job is enqueued under its kind (alone or in a batch), handled as its type and read
// back as it; reading it as another kind is refused.
func TestTypedJobsGoThroughTheirArgsType(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	w := newWorker(t, db, workhorse.WorkerOptions{Queues: []string{"images"}})
	must(t, workhorse.HandleArgs(w, func(ctx context.Context, job *workhorse.Job, r resize) (int, error) {
		return r.Width * 2, nil
	}))
	must(t, workhorse.HandleArgs(w, func(ctx context.Context, job *workhorse.Job, th thumbnail) (string, error) {
		return "thumb of " + th.Image, nil
	}))
	startWorker(t, w)
	one, err := workhorse.EnqueueArgs(ctx, queue, resize{Image: "a.png", Width: 100}, &workhorse.EnqueueOptions{Queue: "images"})
	must(t, err)
	ids, err := queue.EnqueueMany(ctx, []workhorse.EnqueueRequest{
		workhorse.ArgsRequest(thumbnail{Image: "b.png"}, &workhorse.EnqueueOptions{Queue: "images"}),
	})
	must(t, err)
	job := waitForState(t, admin, one, 20*time.Second, workhorse.StateSucceeded)
	if job.Type != "image.resize" || !sameJSON(job.Result, "200") {
		t.Fatalf("resize: %+v", job)
	}
	args, err := workhorse.DecodeArgs[resize](job)
	if err != nil || args != (resize{Image: "a.png", Width: 100}) {
		t.Fatalf("decoded %+v, %v", args, err)
	}
	if job := waitForState(t, admin, ids[0], 20*time.Second, workhorse.StateSucceeded); job.Type != "image.thumbnail" || !sameJSON(job.Result, `"thumb of b.png"`) {
		t.Fatalf("thumbnail: %+v", job)
	}
	var invalid *workhorse.ValidationError
	if _, err := workhorse.DecodeArgs[thumbnail](job); !errors.As(err, &invalid) || invalid.Field != "type" {
		t.Fatalf("read as another kind: %v", err)
	}
}
