package workhorse_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

func TestMain(m *testing.M) {
	code := testpg.Run(m)
	if workerCommand != "" {
		_ = os.RemoveAll(filepath.Dir(workerCommand))
	}
	os.Exit(code)
}

// waitForState polls Admin.GetJob until the job is in one of the states, failing the test
// after timeout.
func waitForState(t *testing.T, admin *workhorse.Admin, jobID string, timeout time.Duration, states ...workhorse.JobState) *workhorse.JobSnapshot {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *workhorse.JobSnapshot
	for time.Now().Before(deadline) {
		job, err := admin.GetJob(context.Background(), jobID)
		if err != nil {
			t.Fatalf("GetJob: %v", err)
		}
		if job != nil {
			last = job
			for _, s := range states {
				if job.State == s {
					return job
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if last == nil {
		t.Fatalf("job %s does not exist", jobID)
	}
	t.Fatalf("job %s is %s after %s, want %v (error %+v)", jobID, last.State, timeout, states, last.Error)
	return nil
}

// startWorker runs w until the test ends (or stop is called), failing the test if Run fails.
func startWorker(t *testing.T, w *workhorse.Worker) (stop func()) {
	t.Helper()
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker.Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// newWorker is a worker on db's pool that polls every 50 ms and ticks every 100 ms unless the
// options say otherwise.
func newWorker(t *testing.T, db *testpg.DB, o workhorse.WorkerOptions) *workhorse.Worker {
	t.Helper()
	if o.Poll == 0 {
		o.Poll = 50 * time.Millisecond
	}
	if o.Tick == 0 {
		o.Tick = 100 * time.Millisecond
	}
	w, err := workhorse.NewWorker(workhorse.Pgx(db.Pool), o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func join(words []string) string { return strings.Join(words, " ") }

// sameJSON compares JSON by value (jsonb orders an object's keys its own way).
func sameJSON(got []byte, want string) bool {
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && reflect.DeepEqual(a, b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func decode(t *testing.T, data []byte, into any) {
	t.Helper()
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
}
