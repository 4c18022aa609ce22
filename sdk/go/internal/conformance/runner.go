package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// Worker is a worker a runner started: in this process or in a process of its own.
type Worker interface {
	// Stop drains the worker (a graceful stop) and waits until it is gone.
	Stop() error
	// Kill ends the worker without recording anything for the jobs it runs.
	Kill() error
}

// StartWorker starts a scenario worker named name that reports effects and marks to the runner.
type StartWorker func(r *Runner, name string) (Worker, error)

// Runner runs one scenario's actions in a database that holds the workhorse schema.
type Runner struct {
	Scenario *Scenario
	Queue    *workhorse.Queue
	Admin    *workhorse.Admin
	// Start starts the workers; it may choose by name (a process for one, in-process for another).
	Start StartWorker
	// Owner, when set, runs statements as the database's owner: a checkpoint step's
	// storedMeanwhile in in-process workers and the save_as_lost_owner action.
	Owner RowQuerier

	db      workhorse.DB
	jobs    map[string]string
	workers map[string]Worker
	mu      sync.Mutex
	effects map[string]int
	marks   map[string]bool
}

// NewRunner returns a runner of s on db, starting workers with start.
func NewRunner(s *Scenario, db workhorse.DB, start StartWorker) *Runner {
	return &Runner{
		Scenario: s, Queue: workhorse.NewQueue(db), Admin: workhorse.NewAdmin(db), Start: start, db: db,
		jobs: map[string]string{}, workers: map[string]Worker{}, effects: map[string]int{}, marks: map[string]bool{},
	}
}

// Effect records that a checkpoint operation ran (Reporter).
func (r *Runner) Effect(jobID, name string) {
	r.mu.Lock()
	r.effects[jobID+"/"+name]++
	r.mu.Unlock()
}

// Mark records that a handler reached a mark (Reporter).
func (r *Runner) Mark(jobID, name string) {
	r.mu.Lock()
	r.marks[jobID+"/"+name] = true
	r.mu.Unlock()
}

// EffectCount is how many checkpoint operations ran, over all jobs.
func (r *Runner) EffectCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.effects {
		n += c
	}
	return n
}

// Name names a job the runner did not enqueue itself (one enqueued by another language), for
// the actions that follow.
func (r *Runner) Name(name, jobID string) {
	r.jobs[name] = jobID
}

// Run runs every action in order; the error names the action that failed.
func (r *Runner) Run(ctx context.Context) error {
	return r.RunFrom(ctx, 0)
}

// RunFrom runs the actions from the one at index first on, in order.
func (r *Runner) RunFrom(ctx context.Context, first int) error {
	for i, a := range r.Scenario.Actions {
		if i < first {
			continue
		}
		if err := r.act(ctx, a); err != nil {
			text, _ := json.Marshal(a)
			return fmt.Errorf("action %d %.200s: %w", i, text, err)
		}
	}
	return nil
}

// StopAll stops the workers still running.
func (r *Runner) StopAll() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(r.workers)) {
		errs = append(errs, r.workers[name].Stop())
		delete(r.workers, name)
	}
	return errors.Join(errs...)
}

func (r *Runner) id(a Action, key string) (string, error) {
	name := a.str(key)
	id, ok := r.jobs[name]
	if !ok {
		return "", fmt.Errorf("no job named %q", name)
	}
	return id, nil
}

func (r *Runner) act(ctx context.Context, a Action) error {
	switch a.Do() {
	case "enqueue", "enqueue_many":
		return r.enqueue(ctx, a)
	case "start_worker":
		w, err := r.Start(r, a.str("worker"))
		if err != nil {
			return err
		}
		r.workers[a.str("worker")] = w
		return nil
	case "stop_worker", "kill_worker":
		w, ok := r.workers[a.str("worker")]
		if !ok {
			return fmt.Errorf("no worker named %q", a.str("worker"))
		}
		delete(r.workers, a.str("worker"))
		if a.Do() == "kill_worker" {
			return w.Kill()
		}
		return w.Stop()
	case "save_as_lost_owner":
		return r.saveAsLostOwner(ctx, a)
	case "await_mark":
		id, err := r.id(a, "job")
		if err != nil {
			return err
		}
		key := id + "/" + a.str("name")
		return waitFor(a, func() (bool, string, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.marks[key], "mark " + a.str("name"), nil
		})
	case "await_state":
		id, err := r.id(a, "job")
		if err != nil {
			return err
		}
		var states []string
		if json.Unmarshal(a["state"], &states) != nil {
			states = []string{a.str("state")}
		}
		return waitFor(a, func() (bool, string, error) {
			job, err := r.Admin.GetJob(ctx, id)
			if err != nil || job == nil {
				return false, "", err
			}
			return slices.Contains(states, string(job.State)), fmt.Sprintf("state %v (the job is %s)", states, job.State), nil
		})
	case "cancel":
		id, err := r.id(a, "job")
		if err != nil {
			return err
		}
		got, err := r.Admin.Cancel(ctx, id, "")
		if err == nil && string(got) != a.str("expect") {
			err = fmt.Errorf("cancel answered %s", got)
		}
		return err
	case "wait_for_result":
		return r.waitForResult(ctx, a)
	case "redrive":
		id, err := r.id(a, "job")
		if err != nil {
			return err
		}
		newID, err := r.Admin.Redrive(ctx, id, workhorse.RedriveOptions{RequestID: a.str("requestId")})
		r.jobs[a.str("as")] = newID
		return err
	case "expect_job":
		return r.expectJob(ctx, a)
	case "expect_timeline":
		return r.expectTimeline(ctx, a)
	case "expect_effects":
		id, err := r.id(a, "job")
		if err != nil {
			return err
		}
		var want map[string]int
		if err := json.Unmarshal(a["counts"], &want); err != nil {
			return err
		}
		got := map[string]int{}
		r.mu.Lock()
		for key, n := range r.effects {
			if len(key) > len(id) && key[:len(id)+1] == id+"/" {
				got[key[len(id)+1:]] = n
			}
		}
		r.mu.Unlock()
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("effects %v, want %v", got, want)
		}
		return nil
	case "expect_dead_letter":
		id, err := r.id(a, "job")
		if err != nil {
			return err
		}
		page, err := r.Admin.ListDeadLetters(ctx, workhorse.ListDeadLettersOptions{Limit: 1000})
		if err != nil {
			return err
		}
		present := slices.ContainsFunc(page.Items, func(j workhorse.JobSnapshot) bool { return j.ID == id })
		if want := string(a["present"]) == "true"; present != want {
			return fmt.Errorf("among the dead letters: %v, want %v", present, want)
		}
		return nil
	case "check_worker_options":
		// Building a worker checks its options; it is never started.
		var spec struct {
			LeaseMs     int64 `json:"leaseMs"`
			HeartbeatMs int64 `json:"heartbeatMs"`
			Concurrency int   `json:"concurrency"`
			PollMs      int64 `json:"pollMs"`
			TickMs      int64 `json:"tickMs"`
		}
		if err := json.Unmarshal(a["options"], &spec); err != nil {
			return err
		}
		ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
		_, err := workhorse.NewWorker(r.db, workhorse.WorkerOptions{
			Lease: ms(spec.LeaseMs), Heartbeat: ms(spec.HeartbeatMs), Concurrency: spec.Concurrency, Poll: ms(spec.PollMs), Tick: ms(spec.TickMs),
		})
		if a["expectError"] == nil {
			return err
		}
		if err == nil {
			return fmt.Errorf("expected %s, the worker was built", a["expectError"])
		}
		return r.expectError(err, a["expectError"])
	case "expect_job_count":
		page, err := r.Admin.ListJobs(ctx, workhorse.ListJobsFilter{Queue: a.str("queue"), Limit: 1000})
		if err != nil {
			return err
		}
		if want, _ := strconv.Atoi(string(a["count"])); len(page.Items) != want {
			return fmt.Errorf("%d jobs in queue %s, want %d", len(page.Items), a.str("queue"), want)
		}
		return nil
	}
	if handled, err := r.pagingAction(ctx, a); handled {
		return err
	}
	if handled, err := r.operatorAction(ctx, a); handled {
		return err
	}
	if handled, err := r.orchestrationAction(ctx, a); handled {
		return err
	}
	return fmt.Errorf("unknown action %q", a.Do())
}

// waitFor polls until ready says so, for the action's timeoutMs (default 20 s).
func waitFor(a Action, ready func() (bool, string, error)) error {
	timeout := 20 * time.Second
	if ms, err := strconv.Atoi(string(a["timeoutMs"])); err == nil {
		timeout = time.Duration(ms) * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	for {
		ok, what, err := ready()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// saveAsLostOwner waits until the job's lease has run out (no worker runs meanwhile, so the dead
// owner is still on its runtime row), then saves as that owner: the status must be `expect`.
func (r *Runner) saveAsLostOwner(ctx context.Context, a Action) error {
	id, err := r.id(a, "job")
	if err != nil {
		return err
	}
	if r.Owner == nil {
		return errors.New("save_as_lost_owner needs the runner's Owner")
	}
	err = waitFor(a, func() (bool, string, error) {
		var expired bool
		err := r.Owner.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workhorse.job_runtime
			WHERE job_id = $1 AND lease_expires_at <= clock_timestamp())`, id).Scan(&expired)
		return expired, "lease expiry", err
	})
	if err != nil {
		return err
	}
	var status string
	if err := r.Owner.QueryRow(ctx, saveAsOwnerSQL, id, a.str("name"), string(orNull(a["value"]))).Scan(&status); err != nil {
		return err
	}
	if status != a.str("expect") {
		return fmt.Errorf("the lost owner's save answered %s, want %s", status, a.str("expect"))
	}
	return nil
}

// waitForResult runs a wait_for_result action: the answer, or the typed error expect names.
func (r *Runner) waitForResult(ctx context.Context, a Action) error {
	id := a.str("jobId")
	if id == "" {
		var err error
		if id, err = r.id(a, "job"); err != nil {
			return err
		}
	}
	timeout := 20 * time.Second
	if ms, err := strconv.Atoi(string(a["timeoutMs"])); err == nil {
		timeout = time.Duration(ms) * time.Millisecond
	}
	var expect map[string]json.RawMessage
	if err := json.Unmarshal(a["expect"], &expect); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got, err := r.Queue.WaitForResult(wctx, id)
	var failed *workhorse.JobFailedError
	var canceled *workhorse.JobResultCanceledError
	var timedOut *workhorse.WaitForResultTimeoutError
	var notFound *workhorse.JobNotFoundError
	envelope := func(e workhorse.ErrorEnvelope, want json.RawMessage) error {
		var fields map[string]string
		if err := json.Unmarshal(want, &fields); err != nil {
			return err
		}
		if (fields["name"] != "" && fields["name"] != e.Name) || (fields["message"] != "" && fields["message"] != e.Message) {
			return fmt.Errorf("the envelope is %+v, not %s", e, want)
		}
		return nil
	}
	switch {
	case errors.As(err, &failed) && expect["failed"] != nil:
		return envelope(failed.Err, expect["failed"])
	case errors.As(err, &canceled) && expect["canceled"] != nil:
		return envelope(canceled.Err, expect["canceled"])
	case errors.As(err, &timedOut) && expect["timeout"] != nil:
		return nil
	case errors.As(err, &notFound) && expect["notFound"] != nil:
		return nil
	case err != nil:
		return fmt.Errorf("the wait failed: %w", err)
	case expect["result"] == nil:
		return fmt.Errorf("the wait answered %s", got)
	case !sameJSON(got, expect["result"]):
		return fmt.Errorf("the wait answered %s, not %s", got, expect["result"])
	}
	return nil
}
