package workhorse_test

import (
	"context"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

func TestSmoke(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	id, err := queue.Enqueue(ctx, "greet", map[string]string{"name": "Ada"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := workhorse.NewWorker(workhorse.Pgx(db.Pool), workhorse.WorkerOptions{Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	type in struct{ Name string }
	err = workhorse.Handle(w, "greet", func(ctx context.Context, job *workhorse.Job, p in) (string, error) {
		return "hello " + p.Name, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	job := waitForState(t, admin, id, 10*time.Second, workhorse.StateSucceeded)
	if string(job.Result) != `"hello Ada"` {
		t.Fatalf("result %s", job.Result)
	}
}
