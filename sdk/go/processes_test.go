package workhorse_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/conformance"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// Three worker processes share one queue and one of them is killed with SIGKILL midway: every
// job still ends succeeded exactly once, with one succeeded attempt, and a job the dead process
// had checkpointed replays its stage instead of running it again.
func TestWorkerProcessesShareAQueueAndSurviveASIGKILL(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	file := filepath.Join("testdata", "shared-queue.json")
	scenario, err := conformance.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	runner := conformance.NewRunner(&scenario, workhorse.Pgx(db.Pool), conformance.Process(conformance.Command{Args: []string{conformanceWorker(t)}}, db.URL, file))
	const jobs = 600
	requests := make([]workhorse.EnqueueRequest, jobs)
	for i := range requests {
		requests[i] = workhorse.EnqueueRequest{Type: "shared.work", Payload: i}
	}
	if _, err := runner.Queue.EnqueueMany(ctx, requests); err != nil {
		t.Fatal(err)
	}
	var workers []conformance.Worker
	for _, name := range []string{"p1", "p2", "p3"} {
		w, err := runner.Start(runner, name)
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
	}
	count := func(sql string) int {
		var n int
		if err := db.Pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for count("SELECT count(*) FROM workhorse.job_outcome") < jobs/4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := workers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	for count("SELECT count(*) FROM workhorse.job_outcome") < jobs && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, w := range workers[1:] {
		if err := w.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if n := count("SELECT count(*) FROM workhorse.job_outcome WHERE state = 'succeeded' AND result = '{\"stage\": \"done\"}'"); n != jobs {
		t.Fatalf("%d of %d jobs succeeded with their checkpoint as result", n, jobs)
	}
	if n := count("SELECT count(*) FROM (SELECT job_id FROM workhorse.attempt_history WHERE outcome = 'succeeded' GROUP BY job_id HAVING count(*) <> 1) AS x"); n != 0 {
		t.Fatalf("%d jobs do not have exactly one succeeded attempt", n)
	}
	if n := count("SELECT count(DISTINCT worker_id) FROM workhorse.attempt_history"); n != 3 {
		t.Fatalf("%d workers ran attempts, want 3", n)
	}
	expired := count("SELECT count(*) FROM workhorse.attempt_history WHERE outcome = 'expired'")
	replayed := count(`SELECT count(*) FROM workhorse.attempt_history a
		WHERE a.outcome = 'expired' AND EXISTS (SELECT 1 FROM workhorse.job_checkpoint k WHERE k.job_id = a.job_id AND k.attempt = a.attempt)`)
	t.Logf("the killed process left %d attempts to expire, %d of them after their checkpoint", expired, replayed)
	if expired == 0 {
		t.Fatal("the killed process held no job: the test proved nothing")
	}
	// Each job's stage ran once, plus once more for each killed attempt that had run the stage
	// without saving it; a saved stage replays and adds nothing.
	if effects := runner.EffectCount(); effects < jobs || effects > jobs+expired-replayed {
		t.Fatalf("%d stages ran for %d jobs (%d expired attempts, %d of them checkpointed)", effects, jobs, expired, replayed)
	}
	if err := runner.StopAll(); err != nil {
		t.Fatal(err)
	}
}
