package workhorse_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/conformance"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

type cronVectors struct {
	Occurrences []struct {
		Note     string   `json:"note"`
		Cron     string   `json:"cron"`
		Timezone string   `json:"timezone"`
		After    string   `json:"after"`
		Expected []string `json:"expected"`
	} `json:"occurrences"`
	Invalid           []struct{ Cron string } `json:"invalid"`
	RefusedExtensions []struct{ Cron string } `json:"refusedExtensions"`
}

func loadCronVectors(t *testing.T) cronVectors {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "protocol", "cron-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v cronVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The shared cron vectors (sdk/protocol/cron-vectors.json) through the server's evaluator.
func TestCronVectorsThroughTheServer(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	for _, v := range loadCronVectors(t).Occurrences {
		var got []string
		err := db.Pool.QueryRow(ctx, `SELECT ARRAY(SELECT to_char(u AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
			FROM unnest(workhorse.cron_occurrences(workhorse.cron_parse($1, 'cron'), $2, $3, 'infinity', $4)) AS u)`,
			v.Cron, v.Timezone, v.After, len(v.Expected)).Scan(&got)
		if err != nil {
			t.Fatalf("%s: %v", v.Note, err)
		}
		if !reflect.DeepEqual(got, v.Expected) {
			t.Errorf("%s (%s in %s after %s): got %v, want %v", v.Note, v.Cron, v.Timezone, v.After, got, v.Expected)
		}
	}
}

// SyncSchedules and the admin calls, with the server's typed refusals.
func TestSyncSchedulesAndTheAdminCalls(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	queue, admin := workhorse.NewQueue(workhorse.Pgx(db.Pool)), workhorse.NewAdmin(workhorse.Pgx(db.Pool))

	vectors := loadCronVectors(t)
	for _, v := range append(vectors.Invalid, vectors.RefusedExtensions...) {
		_, err := queue.SyncSchedules(ctx, "go-invalid", []workhorse.ScheduleDefinition{{Key: "ok", Type: "t", Cron: "@daily"}, {Key: "bad", Type: "t", Cron: v.Cron}})
		var invalid *workhorse.ValidationError
		if !errors.As(err, &invalid) || invalid.Field != "definitions[1].cron" {
			t.Fatalf("%q: got %v, want a ValidationError on definitions[1].cron", v.Cron, err)
		}
	}
	_, err := queue.SyncSchedules(ctx, "go-invalid", []workhorse.ScheduleDefinition{{Key: "z", Type: "t", Cron: "@daily", Timezone: "Mars/Olympus_Mons"}})
	var invalid *workhorse.ValidationError
	if !errors.As(err, &invalid) || invalid.Field != "definitions[0].timezone" {
		t.Fatalf("unknown zone: got %v", err)
	}

	nightly := workhorse.ScheduleDefinition{Key: "nightly", Type: "go.report", Cron: "0 6 * * *", Timezone: "Europe/Berlin", Payload: map[string]string{"format": "pdf"},
		Options: &workhorse.ScheduleJobOptions{Queue: "reports", Priority: 5}}
	synced, err := queue.SyncSchedules(ctx, "go-ops", []workhorse.ScheduleDefinition{nightly, {Key: "warm", Type: "go.warm", Cron: "*/5 * * * *"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []workhorse.SyncedSchedule{{Key: "nightly", Change: "created", Revision: 1}, {Key: "warm", Change: "created", Revision: 1}}; !reflect.DeepEqual(synced, want) {
		t.Fatalf("synced %v", synced)
	}
	if synced, _ = queue.SyncSchedules(ctx, "go-ops", []workhorse.ScheduleDefinition{nightly}); len(synced) != 2 || synced[0].Change != "unchanged" || synced[1].Change != "disabled" {
		t.Fatalf("second sync %v", synced)
	}
	list, err := admin.ListSchedules(ctx, "go-ops")
	if err != nil || len(list) != 2 {
		t.Fatalf("list %v %v", list, err)
	}
	if list[0].Key != "nightly" || list[0].State != "active" || list[0].NextRunAt == nil || list[1].State != "disabled" || list[1].NextRunAt != nil {
		t.Fatalf("listed %+v", list)
	}
	if berlin, _ := time.LoadLocation("Europe/Berlin"); list[0].NextRunAt.In(berlin).Hour() != 6 {
		t.Fatalf("next run %v is not 06:00 in Berlin", list[0].NextRunAt)
	}
	if changed, err := admin.PauseSchedule(ctx, "go-ops", "nightly", workhorse.ActorOptions{Actor: "alice", Reason: "freeze"}); err != nil || !changed {
		t.Fatalf("pause: %v %v", changed, err)
	}
	if changed, _ := admin.PauseSchedule(ctx, "go-ops", "nightly", workhorse.ActorOptions{}); changed {
		t.Fatal("pausing a paused schedule changed it")
	}
	jobID, err := admin.TriggerSchedule(ctx, "go-ops", "nightly", workhorse.ActorOptions{Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := admin.ResumeSchedule(ctx, "go-ops", "nightly", workhorse.ActorOptions{}); err != nil || !changed {
		t.Fatalf("resume: %v %v", changed, err)
	}
	history, err := admin.ScheduleHistory(ctx, "go-ops", "nightly", 100)
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, h := range history {
		changes = append(changes, h.Change+" "+h.Actor)
	}
	if want := []string{"resumed ", "triggered alice", "paused alice", "created "}; !reflect.DeepEqual(changes, want) || history[1].JobID != jobID {
		t.Fatalf("history %v", changes)
	}
	var queueName string
	if err := db.Pool.QueryRow(ctx, "SELECT queue FROM workhorse.job WHERE id = $1", jobID).Scan(&queueName); err != nil || queueName != "reports" {
		t.Fatalf("triggered job in %q (%v)", queueName, err)
	}
	_, err = admin.PauseSchedule(ctx, "go-ops", "missing", workhorse.ActorOptions{})
	var notFound *workhorse.ScheduleNotFoundError
	if !errors.As(err, &notFound) {
		t.Fatalf("unknown key: got %v", err)
	}
}

// Three Go worker processes tick one per-second schedule, synced by Go, for well over 100
// occurrences: every second is fired exactly once (the server plans; no TypeScript anywhere).
func TestGoWorkerProcessesFireAPerSecondScheduleOncePerOccurrence(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for over two minutes")
	}
	db := testpg.New(t)
	ctx := context.Background()
	file := filepath.Join("testdata", "per-second-schedule.json")
	scenario, err := conformance.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	runner := conformance.NewRunner(&scenario, workhorse.Pgx(db.Pool), conformance.Process(conformance.Command{Args: []string{conformanceWorker(t)}}, db.URL, file))
	var workers []conformance.Worker
	for _, name := range []string{"s1", "s2", "s3"} {
		w, err := runner.Start(runner, name)
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
	}
	started := time.Now()
	if _, err := runner.Queue.SyncSchedules(ctx, "go", []workhorse.ScheduleDefinition{{Key: "every-second", Type: "go.cron", Cron: "* * * * * *"}}); err != nil {
		t.Fatal(err)
	}
	count := func(sql string) int {
		var n int
		if err := db.Pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(240 * time.Second)
	for count("SELECT count(*) FROM workhorse.schedule_occurrence WHERE state = 'fired'") < 130 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	for _, w := range workers {
		if err := w.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(started); elapsed < 125*time.Second {
		t.Fatalf("130 occurrences fired in %v: faster than one a second", elapsed)
	}
	fired := count("SELECT count(*) FROM workhorse.schedule_occurrence WHERE state = 'fired'")
	if fired < 130 {
		t.Fatalf("only %d occurrences fired", fired)
	}
	if n := count("SELECT count(*) FROM workhorse.schedule_occurrence WHERE state = 'skipped'"); n != 0 {
		t.Fatalf("%d occurrences skipped", n)
	}
	// Consecutive seconds, each one job, and no occurrence named by two jobs.
	if n := count(`SELECT count(*) FROM (SELECT at, lag(at) OVER (ORDER BY at) AS previous FROM workhorse.schedule_occurrence WHERE state = 'fired') AS x
		WHERE previous IS NOT NULL AND at - previous <> interval '1 second'`); n != 0 {
		t.Fatalf("%d gaps between fired seconds", n)
	}
	if n := count("SELECT count(*) FROM workhorse.job WHERE type = 'go.cron'"); n != fired {
		t.Fatalf("%d jobs for %d fired occurrences", n, fired)
	}
	if n := count("SELECT count(DISTINCT data ->> 'occurrence') FROM workhorse.job_event WHERE kind = 'schedule_fired'"); n != fired {
		t.Fatalf("%d distinct occurrences in schedule_fired events for %d fired", n, fired)
	}
}
