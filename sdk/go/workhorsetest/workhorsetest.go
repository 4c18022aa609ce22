// Package workhorsetest helps the tests of applications that use the workhorse Go SDK, as
// Oban.Testing and rivertest do: what was enqueued (Enqueued, RequireEnqueued,
// RequireEnqueuedArgs, RequireNotEnqueued), a job's state (WaitForState, RequireState), and
// running the due jobs to the end (Drain). They read through workhorse.Admin on the DB given
// (a pool, or your transaction to see its own uncommitted jobs), so run the tests against a
// real PostgreSQL with the schema installed (workhorse.InstallSchema).
package workhorsetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// Filter selects jobs; zero fields select all.
type Filter struct {
	Type  string
	Queue string
	// Since keeps jobs created at or after this moment (take time.Now() before the act you test).
	Since time.Time
	// States keeps jobs in one of these states.
	States []workhorse.JobState
	// Payload keeps jobs whose payload is this value, compared as JSON (an object's key order aside).
	Payload any
}

// Enqueued lists the jobs the filter selects, oldest first, as full snapshots.
func Enqueued(ctx context.Context, db workhorse.DB, f Filter) ([]workhorse.JobSnapshot, error) {
	var want any
	if f.Payload != nil {
		raw, err := json.Marshal(f.Payload)
		if err != nil {
			return nil, fmt.Errorf("workhorsetest: the filter's payload is not JSON: %w", err)
		}
		_ = json.Unmarshal(raw, &want)
	}
	admin := workhorse.NewAdmin(db)
	var jobs []workhorse.JobSnapshot
	cursor := ""
	for {
		page, err := admin.ListJobs(ctx, workhorse.ListJobsFilter{Type: f.Type, Queue: f.Queue, States: f.States, Limit: 1000, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, job := range page.Items {
			if !f.Since.IsZero() && job.CreatedAt.Before(f.Since) {
				slices.Reverse(jobs)
				return jobs, nil
			}
			if want != nil {
				var got any
				if json.Unmarshal(job.Payload, &got) != nil || !reflect.DeepEqual(got, want) {
					continue
				}
			}
			jobs = append(jobs, job)
		}
		if page.NextCursor == "" {
			slices.Reverse(jobs)
			return jobs, nil
		}
		cursor = page.NextCursor
	}
}

// RequireEnqueued fails the test unless the filter selects at least one job, and returns them,
// oldest first.
func RequireEnqueued(t testing.TB, db workhorse.DB, f Filter) []workhorse.JobSnapshot {
	t.Helper()
	jobs, err := Enqueued(t.Context(), db, f)
	if err != nil {
		t.Fatalf("workhorsetest: listing jobs: %v", err)
	}
	if len(jobs) == 0 {
		t.Fatalf("workhorsetest: no job %s was enqueued", describe(f))
	}
	return jobs
}

// RequireEnqueuedArgs fails the test unless a job of args' kind with args as its payload was
// enqueued (f narrows further; its Type and Payload are args'), and returns the newest.
func RequireEnqueuedArgs[A workhorse.JobArgs](t testing.TB, db workhorse.DB, args A, f *Filter) workhorse.JobSnapshot {
	t.Helper()
	var filter Filter
	if f != nil {
		filter = *f
	}
	filter.Type, filter.Payload = args.Kind(), args
	jobs := RequireEnqueued(t, db, filter)
	return jobs[len(jobs)-1]
}

// RequireNotEnqueued fails the test when the filter selects a job.
func RequireNotEnqueued(t testing.TB, db workhorse.DB, f Filter) {
	t.Helper()
	jobs, err := Enqueued(t.Context(), db, f)
	if err != nil {
		t.Fatalf("workhorsetest: listing jobs: %v", err)
	}
	if len(jobs) > 0 {
		t.Fatalf("workhorsetest: %d job(s) %s were enqueued, the first %s", len(jobs), describe(f), jobs[0].ID)
	}
}

func describe(f Filter) string {
	var parts []string
	for _, p := range []struct{ name, value string }{{"type", f.Type}, {"queue", f.Queue}} {
		if p.value != "" {
			parts = append(parts, p.name+" "+p.value)
		}
	}
	if len(f.States) > 0 {
		parts = append(parts, fmt.Sprintf("in state %v", f.States))
	}
	if f.Payload != nil {
		raw, _ := json.Marshal(f.Payload)
		parts = append(parts, "with payload "+string(raw))
	}
	if !f.Since.IsZero() {
		parts = append(parts, "since "+f.Since.Format(time.RFC3339Nano))
	}
	if len(parts) == 0 {
		return "at all"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// StateError is WaitForState's refusal: the job does not exist, ended in another terminal state
// (it never changes again), or did not reach the states before ctx was done. Job is its last
// snapshot (nil when there is none).
type StateError struct {
	JobID string
	Want  []workhorse.JobState
	Job   *workhorse.JobSnapshot
	Err   error
}

func (e *StateError) Error() string {
	switch {
	case e.Job == nil:
		return fmt.Sprintf("workhorsetest: no job %s exists (was its transaction rolled back?)", e.JobID)
	case e.Err == nil:
		return fmt.Sprintf("workhorsetest: job %s (%s) ended %s and will never reach %s (attempt %d of %d, error %s)",
			e.JobID, e.Job.Type, e.Job.State, states(e.Want), e.Job.CurrentAttempt, e.Job.MaxAttempts, errorText(e.Job.Error))
	default:
		return fmt.Sprintf("workhorsetest: job %s (%s) did not reach %s: %v; it is %s (attempt %d of %d, run at %s, last error %s)",
			e.JobID, e.Job.Type, states(e.Want), e.Err, e.Job.State, e.Job.CurrentAttempt, e.Job.MaxAttempts, e.Job.RunAt.Format(time.RFC3339Nano), errorText(e.Job.Error))
	}
}

func (e *StateError) Unwrap() error { return e.Err }

func states(s []workhorse.JobState) string {
	words := make([]string, len(s))
	for i, state := range s {
		words[i] = string(state)
	}
	return strings.Join(words, " or ")
}

func errorText(e *workhorse.ErrorEnvelope) string {
	if e == nil {
		return "none"
	}
	return e.Name + ": " + e.Message
}

func terminal(s workhorse.JobState) bool {
	return s == workhorse.StateSucceeded || s == workhorse.StateFailed || s == workhorse.StateCanceled
}

// DefaultTimeout bounds WaitForState, RequireState and Drain when their context has no deadline.
const DefaultTimeout = 10 * time.Second

// bounded is ctx, with DefaultTimeout when it has no deadline.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// WaitForState waits until the job is in one of the states and returns its snapshot; a
// *StateError when it ended in another terminal state, does not exist, or ctx ended first
// (DefaultTimeout when ctx has no deadline). It runs no job: a running worker (or Drain) must.
func WaitForState(ctx context.Context, db workhorse.DB, jobID string, want ...workhorse.JobState) (*workhorse.JobSnapshot, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	admin := workhorse.NewAdmin(db)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		job, err := admin.GetJob(context.WithoutCancel(ctx), jobID)
		if err != nil {
			return nil, err
		}
		if job == nil {
			return nil, &StateError{JobID: jobID, Want: want}
		}
		if slices.Contains(want, job.State) {
			return job, nil
		}
		if terminal(job.State) {
			return job, &StateError{JobID: jobID, Want: want, Job: job}
		}
		select {
		case <-ctx.Done():
			return job, &StateError{JobID: jobID, Want: want, Job: job, Err: ctx.Err()}
		case <-poll.C:
		}
	}
}

// RequireState waits (up to DefaultTimeout) until the job is in one of the states, failing the
// test with the job as it is otherwise, and returns its snapshot.
func RequireState(t testing.TB, db workhorse.DB, jobID string, want ...workhorse.JobState) *workhorse.JobSnapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), DefaultTimeout)
	defer cancel()
	job, err := WaitForState(ctx, db, jobID, want...)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// DrainTimeoutError: ctx ended while jobs were still due; Due lists them (empty when only a
// running handler was left).
type DrainTimeoutError struct {
	Due []workhorse.JobSnapshot
	Err error
}

func (e *DrainTimeoutError) Error() string {
	var listed []string
	for i, job := range e.Due {
		if i == 10 {
			listed = append(listed, fmt.Sprintf("and %d more", len(e.Due)-10))
			break
		}
		listed = append(listed, fmt.Sprintf("%s (%s on %s, %s, attempt %d)", job.ID, job.Type, job.Queue, job.State, job.CurrentAttempt))
	}
	if len(listed) == 0 {
		listed = []string{"a handler was still running"}
	}
	return fmt.Sprintf("workhorsetest: work was still due when the drain gave up (%v): %s", e.Err, strings.Join(listed, ", "))
}

func (e *DrainTimeoutError) Unwrap() error { return e.Err }

// Drain runs the worker until its queues hold nothing due (nothing ready, nothing running, no
// scheduled job whose time has come: a retry whose delay still runs is not due), then stops it
// and returns. Jobs the handlers enqueue in those queues run too. The worker must not have run
// (a worker runs once): build one per drain. When ctx ends first, the worker stops at once (its
// handlers' contexts are canceled, nothing is recorded for them) and the error is a
// *DrainTimeoutError listing what was still due; a ctx without a deadline gets DefaultTimeout.
func Drain(ctx context.Context, db workhorse.DB, w *workhorse.Worker) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	admin := workhorse.NewAdmin(db)
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() { done <- w.Run(runCtx) }()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("workhorsetest: the worker stopped before the drain ended")
			}
			return err
		case <-ctx.Done():
			due, _ := dueJobs(context.WithoutCancel(ctx), admin, w.Queues())
			_ = w.Stop(ctx)
			<-done
			return &DrainTimeoutError{Due: due, Err: ctx.Err()}
		case <-poll.C:
		}
		due, err := dueJobs(ctx, admin, w.Queues())
		if err != nil && ctx.Err() == nil {
			_ = w.Stop(ctx)
			<-done
			return err
		}
		if err == nil && len(due) == 0 {
			stop()
			return <-done
		}
	}
}

// dueJobs are the jobs of the queues a worker would run now: ready, active, or scheduled and due.
func dueJobs(ctx context.Context, admin *workhorse.Admin, queues []string) ([]workhorse.JobSnapshot, error) {
	now := time.Now()
	var due []workhorse.JobSnapshot
	for _, queue := range queues {
		page, err := admin.ListJobs(ctx, workhorse.ListJobsFilter{Queue: queue, Limit: 1000,
			States: []workhorse.JobState{workhorse.StateReady, workhorse.StateActive, workhorse.StateScheduled}})
		if err != nil {
			return nil, err
		}
		for _, job := range page.Items {
			if job.State != workhorse.StateScheduled || !job.RunAt.After(now) {
				due = append(due, job)
			}
		}
	}
	return due, nil
}
