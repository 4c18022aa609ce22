package workhorse_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// A handler's sleep and wait timeouts one past the bounds of limits.json are refused by the
// SQL, naming the field (the client checks whole milliseconds only), and the job goes on.
func TestHandlerDurationsPastTheLimitsAreRefusedByTheSQL(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "protocol", "limits.json"))
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Handler struct {
			SleepMs, WaitTimeoutMs struct{ Min, Max int64 }
		}
	}
	must(t, json.Unmarshal(data, &l))
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	db := testpg.New(t)
	ctx := context.Background()
	w := newWorker(t, db, workhorse.WorkerOptions{Concurrency: 1})
	must(t, workhorse.Handle(w, "limits.handler", func(ctx context.Context, job *workhorse.Job, _ any) ([]string, error) {
		calls := []func() error{
			func() error { return job.Sleep(ctx, "too-long", ms(l.Handler.SleepMs.Max+1)) },
			func() error { return job.Sleep(ctx, "too-short", ms(l.Handler.SleepMs.Min-1)) },
			func() error {
				_, err := workhorse.WaitForSignal[any](ctx, job, "signal", &workhorse.WaitOptions{Timeout: ms(l.Handler.WaitTimeoutMs.Max + 1)})
				return err
			},
			func() error {
				_, err := job.WaitForHuman(ctx, "human", &workhorse.HumanWaitOptions{Timeout: ms(l.Handler.WaitTimeoutMs.Min - 2)})
				return err
			},
		}
		var fields []string
		for _, call := range calls {
			var invalid *workhorse.ValidationError
			if err := call(); errors.As(err, &invalid) {
				fields = append(fields, invalid.Field)
			} else {
				fields = append(fields, "accepted: "+errorText(err))
			}
		}
		return fields, nil
	}))
	startWorker(t, w)
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	id, err := queue.Enqueue(ctx, "limits.handler", nil, nil)
	must(t, err)
	job := waitForState(t, workhorse.NewAdmin(workhorse.Pgx(db.Pool)), id, 20*time.Second, workhorse.StateSucceeded)
	if !sameJSON(job.Result, `["ms","ms","timeoutMs","timeoutMs"]`) {
		t.Fatalf("result %s", job.Result)
	}
}

func errorText(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
