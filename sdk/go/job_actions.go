package workhorse

import (
	"context"
	"encoding/json"
	"time"
)

// JobActionRefusedError says an operator action was refused for the job's state (SQLSTATE P1050): run
// now of a running or blocked job, a reschedule of one that started, a delete of a live job or
// of a finished one a live job still references (State "referenced"). Nothing was written.
type JobActionRefusedError struct {
	JobID string
	// Action is "run_now", "reschedule" or "delete".
	Action string
	// State is active, canceling, ready, scheduled, retrying, sleeping, waiting, blocked,
	// succeeded, failed, canceled or referenced.
	State   string
	Message string
}

func (e *JobActionRefusedError) Error() string { return "job " + e.JobID + " " + e.Message }

// JobActionFilter selects the jobs of a bulk action; every field set must match.
// FinishedAfter/FinishedBefore only for DeleteMatching; JobIDs (1 to 1000) is a selection.
type JobActionFilter struct {
	Queue          string     `json:"queue,omitempty"`
	Type           string     `json:"type,omitempty"`
	States         []JobState `json:"states,omitempty"`
	Tag            string     `json:"tag,omitempty"`
	CreatedAfter   *time.Time `json:"createdAfter,omitempty"`
	CreatedBefore  *time.Time `json:"createdBefore,omitempty"`
	FinishedAfter  *time.Time `json:"finishedAfter,omitempty"`
	FinishedBefore *time.Time `json:"finishedBefore,omitempty"`
	JobIDs         []string   `json:"jobIds,omitempty"`
}

// BulkActionOptions: who asked and why (recorded with each job), a dry run, and how many jobs
// one call changes (1 to 1000; 0 means 1000).
type BulkActionOptions struct {
	ActorOptions
	DryRun bool
	Limit  int
}

// BulkActionSample is a job a dry run would change.
type BulkActionSample struct {
	ID        string    `json:"id"`
	Queue     string    `json:"queue"`
	Type      string    `json:"type"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"createdAt"`
}

// BulkActionResult says what a bulk action did or, in a dry run, would do. A call changes at
// most Limit jobs, oldest first: call again while More.
type BulkActionResult struct {
	Action string `json:"action"`
	DryRun bool   `json:"dryRun"`
	// Dry run: the jobs it would change (counting stops at 100,000: Capped). Otherwise the jobs this call took up.
	Matched int      `json:"matched"`
	Capped  bool     `json:"capped"`
	Changed int      `json:"changed"`
	JobIDs  []string `json:"jobIds"`
	// Each changed job's answer, counted: canceled, cancel_requested, ready, deleted.
	Outcomes map[string]int `json:"outcomes"`
	// Jobs the filter matches that the action leaves alone, by state.
	Skipped map[string]int `json:"skipped"`
	// Jobs a worker was writing just then, or that changed state since they were listed.
	Busy   int                `json:"busy"`
	Sample []BulkActionSample `json:"sample"`
	More   bool               `json:"more"`
}

// RescheduleOptions: a new run time and/or priority (0 to 100), and who asked and why.
type RescheduleOptions struct {
	ActorOptions
	RunAt    *time.Time
	Priority *int
}

// RunNow makes a scheduled, retrying or sleeping job ready now: "ready", "already_ready" or
// "not_found"; any other state is refused with a *JobActionRefusedError.
func (a *Admin) RunNow(ctx context.Context, jobID string, o ActorOptions) (string, error) {
	return a.jobAction(ctx, runNowSQL, jobID, nullable(o.Actor), nullable(o.Reason))
}

// Reschedule gives a job that has not started (scheduled, ready, retrying) a new run time and/or
// priority: "rescheduled" or "not_found"; any other state is refused with a *JobActionRefusedError.
func (a *Admin) Reschedule(ctx context.Context, jobID string, o RescheduleOptions) (string, error) {
	var runAt, priority any
	if o.RunAt != nil {
		runAt = *o.RunAt
	}
	if o.Priority != nil {
		priority = *o.Priority
	}
	return a.jobAction(ctx, rescheduleSQL, jobID, runAt, priority, nullable(o.Actor), nullable(o.Reason))
}

// DeleteJob deletes a finished job and what references it, as retention would: "deleted" or
// "not_found"; a live job, or one a live job still references, is refused with a *JobActionRefusedError.
func (a *Admin) DeleteJob(ctx context.Context, jobID string, o ActorOptions) (string, error) {
	return a.jobAction(ctx, deleteJobSQL, jobID, nullable(o.Actor), nullable(o.Reason))
}

// CancelMatching cancels up to Limit jobs the filter matches, oldest first, each as Cancel does
// (a running job's worker is told); with DryRun it counts them and shows a sample instead.
func (a *Admin) CancelMatching(ctx context.Context, f JobActionFilter, o BulkActionOptions) (BulkActionResult, error) {
	return a.bulk(ctx, cancelMatchingSQL, f, o)
}

// RunNowMatching runs up to Limit scheduled, retrying or sleeping jobs the filter matches now.
func (a *Admin) RunNowMatching(ctx context.Context, f JobActionFilter, o BulkActionOptions) (BulkActionResult, error) {
	return a.bulk(ctx, runNowMatchingSQL, f, o)
}

// DeleteMatching deletes up to Limit finished jobs the filter matches; live and referenced ones are counted.
func (a *Admin) DeleteMatching(ctx context.Context, f JobActionFilter, o BulkActionOptions) (BulkActionResult, error) {
	return a.bulk(ctx, deleteMatchingSQL, f, o)
}

func (a *Admin) jobAction(ctx context.Context, sql, jobID string, args ...any) (string, error) {
	if err := checkJobID(jobID, "jobId"); err != nil {
		return "", err
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return "", err
	}
	return status(ctx, a.db, sql, append([]any{jobID}, args...)...)
}

func (a *Admin) bulk(ctx context.Context, sql string, f JobActionFilter, o BulkActionOptions) (BulkActionResult, error) {
	var result BulkActionResult
	limit := o.Limit
	if limit == 0 {
		limit = 1000
	}
	filter, err := json.Marshal(f)
	if err != nil {
		return result, invalid("filter", "%s", err.Error())
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return result, err
	}
	text, err := status(ctx, a.db, sql, string(filter), o.DryRun, nullable(o.Actor), nullable(o.Reason), limit)
	if err != nil {
		return result, err
	}
	err = json.Unmarshal([]byte(text), &result)
	return result, err
}
