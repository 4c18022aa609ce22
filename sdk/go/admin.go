package workhorse

import (
	"context"
	"encoding/json"
	"time"
)

// Admin reads what happened to jobs and acts on them as an operator (cancel, redrive, pause).
// Like Queue, it runs on a pool or, through With, inside your transaction.
//
//	admin := workhorse.NewAdmin(workhorse.Pgx(pool))
//	job, err := admin.GetJob(ctx, jobID)
//	fmt.Println(job.State, job.CurrentAttempt, string(job.Result))
type Admin struct {
	db     DB
	schema *schemaGate
}

// NewAdmin returns an Admin that runs its calls on db.
func NewAdmin(db DB) *Admin {
	return &Admin{db: db, schema: &schemaGate{}}
}

// With returns an Admin whose calls run on db instead, typically your open transaction.
func (a *Admin) With(db DB) *Admin {
	return &Admin{db: db, schema: a.schema}
}

const snapshotColumns = `id::text, queue, type, payload, priority, max_attempts, retry_policy, to_json(tags)::text, state,
  current_attempt, run_at, created_at, finished_at, result, error, worker_id, lease_expires_at, cancel_requested_at,
  progress, redriven_from::text, to_json(redriven_to)::text, seq, deadline, execution_timeout_ms`

// GetJob returns the job's snapshot, or nil when no such job exists.
func (a *Admin) GetJob(ctx context.Context, jobID string) (*JobSnapshot, error) {
	if err := checkJobID(jobID, "jobId"); err != nil {
		return nil, err
	}
	jobs, _, err := a.snapshots(ctx, "SELECT "+snapshotColumns+" FROM workhorse.get_job_v1($1)", []any{jobID}, nil)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	jobs[0].JobLineage, err = a.lineage(ctx, jobID, jobs[0].State)
	return &jobs[0], err
}

// GetJobTimeline returns the job's history (lifecycle events and closed attempts) in the order
// it was written, a page at a time; pass NextCursor back to read on.
func (a *Admin) GetJobTimeline(ctx context.Context, jobID string, o TimelineOptions) (Page[TimelineEntry], error) {
	var page Page[TimelineEntry]
	if err := checkJobID(jobID, "jobId"); err != nil {
		return page, err
	}
	limit, err := limitOf(o.Limit, 100)
	if err != nil {
		return page, err
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return page, err
	}
	page.Items = []TimelineEntry{}
	err = queryAll(ctx, a.db, pagedSQL("id::text, at, source, kind, attempt, worker_id, fence_token, data, login_role",
		"workhorse.get_timeline_v3($1, $2, $3)"),
		[]any{jobID, nullable(o.Cursor), limit}, func(r rows) error {
			var e TimelineEntry
			var attempt *int64
			var worker, loginRole *string
			var next string
			var data []byte
			if err := r.Scan(&e.ID, &e.At, &e.Source, &e.Kind, &attempt, &worker, &e.FenceToken, &data, &loginRole, &next); err != nil {
				return err
			}
			e.Data = data
			e.LoginRole = deref(loginRole)
			if attempt != nil {
				n := int(*attempt)
				e.Attempt = &n
			}
			e.WorkerID = deref(worker)
			page.Items = append(page.Items, e)
			page.NextCursor = next
			return nil
		})
	return page, err
}

// ListJobs returns jobs newest first, filtered by queue, type and current state, a page at a
// time. Paging is stable: jobs enqueued meanwhile do not shift later pages.
func (a *Admin) ListJobs(ctx context.Context, f ListJobsFilter) (Page[JobSnapshot], error) {
	var page Page[JobSnapshot]
	queue, typ, err := optionalNames(f.Queue, f.Type)
	if err != nil {
		return page, err
	}
	var states any
	if f.States != nil {
		list := make([]string, len(f.States))
		for i, s := range f.States {
			if !knownState(s) {
				return page, invalid("states", "must be a list of blocked, scheduled, ready, active, succeeded, failed, canceled")
			}
			list[i] = string(s)
		}
		states = textArray(list)
	}
	limit, err := limitOf(f.Limit, 50)
	if err != nil {
		return page, err
	}
	if f.ParentID != "" {
		return a.listChildren(ctx, f.ParentID, queue, typ, states, limit, f.Cursor)
	}
	var next string
	page.Items, _, err = a.snapshots(ctx, pagedSQL(snapshotColumns, "workhorse.list_jobs_v3($1, $2, $3::text[], $4, $5)"),
		[]any{queue, typ, states, limit, nullable(f.Cursor)}, &next)
	page.NextCursor = next
	return page, err
}

// Cancel cancels a job: at once when it is not running; otherwise its worker is told to stop
// (the handler's context is canceled with a *JobCanceledError) and the job ends canceled when
// the worker acknowledges.
func (a *Admin) Cancel(ctx context.Context, jobID string, reason string) (CancelResult, error) {
	if err := checkJobID(jobID, "jobId"); err != nil {
		return "", err
	}
	if len([]rune(reason)) > 1000 {
		return "", invalid("reason", "must be a string of at most 1000 characters")
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return "", err
	}
	s, err := status(ctx, a.db, "SELECT workhorse.cancel_v1($1, $2)", jobID, nullable(reason))
	return CancelResult(s), err
}

// ListDeadLetters returns dead letters (failed jobs), newest first, filtered by queue, type,
// final error name and finish time, a page at a time.
func (a *Admin) ListDeadLetters(ctx context.Context, o ListDeadLettersOptions) (Page[JobSnapshot], error) {
	var page Page[JobSnapshot]
	f, err := checkDeadLetterFilter(o.DeadLetterFilter)
	if err != nil {
		return page, err
	}
	limit, err := limitOf(o.Limit, 50)
	if err != nil {
		return page, err
	}
	var next string
	page.Items, _, err = a.snapshots(ctx, pagedSQL(snapshotColumns,
		"workhorse.list_dead_letters_v2($1, $2, $3, $4::text::timestamptz, $5::text::timestamptz, $6, $7)"),
		[]any{nullable(f.Queue), nullable(f.Type), nullable(f.ErrorName), f.after, f.before, limit, nullable(o.Cursor)}, &next)
	page.NextCursor = next
	return page, err
}

// Redrive creates a new job from a dead letter, with the same definition at attempt 1 (no
// checkpoints carried over), and returns its id. The source stays failed; both jobs record the
// lineage. Idempotent per RequestID.
func (a *Admin) Redrive(ctx context.Context, jobID string, o RedriveOptions) (string, error) {
	if err := checkJobID(jobID, "jobId"); err != nil {
		return "", err
	}
	if err := checkRedrive(o.RequestID, 200, o.ActorOptions); err != nil {
		return "", err
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return "", err
	}
	var id string
	err := queryRow(ctx, a.db, "SELECT workhorse.redrive_v1($1, $2, $3, $4)::text",
		[]any{jobID, o.RequestID, nullable(o.Actor), nullable(o.Reason)}, &id)
	return id, err
}

// RedriveMany redrives up to Limit dead letters matching a filter, each idempotent under
// "<RequestID>:<job id>"; with DryRun nothing is written and the result lists what would be.
func (a *Admin) RedriveMany(ctx context.Context, filter DeadLetterFilter, o RedriveManyOptions) ([]RedriveResult, error) {
	f, err := checkDeadLetterFilter(filter)
	if err != nil {
		return nil, err
	}
	if err := checkRedrive(o.RequestID, 160, o.ActorOptions); err != nil {
		return nil, err
	}
	limit, err := limitOf(o.Limit, 1000)
	if err != nil {
		return nil, err
	}
	wire := map[string]any{}
	for key, value := range map[string]any{"queue": f.Queue, "type": f.Type, "errorName": f.ErrorName, "finishedAfter": f.after, "finishedBefore": f.before} {
		if s, ok := value.(string); ok && s != "" {
			wire[key] = s
		}
	}
	filterJSON, _ := json.Marshal(wire)
	if err := a.schema.check(ctx, a.db); err != nil {
		return nil, err
	}
	results := []RedriveResult{}
	err = queryAll(ctx, a.db, "SELECT source_job_id::text, new_job_id::text FROM workhorse.redrive_many_v1($1::jsonb, $2, $3, $4, $5, $6)",
		[]any{string(filterJSON), o.RequestID, o.DryRun, nullable(o.Actor), nullable(o.Reason), limit}, func(r rows) error {
			var res RedriveResult
			var newID *string
			err := r.Scan(&res.SourceJobID, &newID)
			res.NewJobID = deref(newID)
			results = append(results, res)
			return err
		})
	return results, err
}

// PauseQueue stops workers from claiming from the queue; running jobs finish and enqueue goes on.
func (a *Admin) PauseQueue(ctx context.Context, queue string, o ActorOptions) (QueueInfo, error) {
	return a.setPaused(ctx, "pause_queue_v1", queue, o)
}

// ResumeQueue resumes a paused queue and wakes its workers.
func (a *Admin) ResumeQueue(ctx context.Context, queue string, o ActorOptions) (QueueInfo, error) {
	return a.setPaused(ctx, "resume_queue_v1", queue, o)
}

// ListQueues lists every queue with live jobs or a pause record.
func (a *Admin) ListQueues(ctx context.Context) ([]QueueInfo, error) {
	if err := a.schema.check(ctx, a.db); err != nil {
		return nil, err
	}
	return a.queues(ctx, "", nil)
}

func (a *Admin) setPaused(ctx context.Context, fn, queue string, o ActorOptions) (QueueInfo, error) {
	if err := checkName(queue, "queue"); err != nil {
		return QueueInfo{}, err
	}
	if err := checkActor(o); err != nil {
		return QueueInfo{}, err
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return QueueInfo{}, err
	}
	var ignored []byte
	if err := queryRow(ctx, a.db, "SELECT workhorse."+fn+"($1, $2, $3)", []any{queue, nullable(o.Actor), nullable(o.Reason)}, &ignored); err != nil {
		return QueueInfo{}, err
	}
	list, err := a.queues(ctx, " WHERE queue = $1", []any{queue})
	if err != nil || len(list) == 0 {
		return QueueInfo{Queue: queue}, err
	}
	return list[0], nil
}

func (a *Admin) queues(ctx context.Context, where string, args []any) ([]QueueInfo, error) {
	list := []QueueInfo{}
	err := queryAll(ctx, a.db, "SELECT queue, paused, changed_at, changed_by, reason, ready, scheduled, active, blocked FROM workhorse.list_queues_v1()"+where,
		args, func(r rows) error {
			var q QueueInfo
			var by, reason *string
			var ready, scheduled, active, blocked int64
			err := r.Scan(&q.Queue, &q.Paused, &q.ChangedAt, &by, &reason, &ready, &scheduled, &active, &blocked)
			q.ChangedBy, q.Reason = deref(by), deref(reason)
			q.Ready, q.Scheduled, q.Active, q.Blocked = int(ready), int(scheduled), int(active), int(blocked)
			list = append(list, q)
			return err
		})
	return list, err
}

// snapshots runs a query over snapshotColumns (plus, when extra is given, one more text column
// whose last value it keeps) and returns the jobs and the last row's seq.
func (a *Admin) snapshots(ctx context.Context, sql string, args []any, extra *string) ([]JobSnapshot, int64, error) {
	if err := a.schema.check(ctx, a.db); err != nil {
		return nil, 0, err
	}
	jobs := []JobSnapshot{}
	var seq int64
	err := queryAll(ctx, a.db, sql, args, func(r rows) error {
		var j JobSnapshot
		var priority, maxAttempts, attempt int64
		var tags, redrivenTo, errorJSON, payload, policy, result, progress []byte
		var state string
		var worker, redrivenFrom *string
		var timeoutMs *int64
		dest := []any{&j.ID, &j.Queue, &j.Type, &payload, &priority, &maxAttempts, &policy, &tags, &state,
			&attempt, &j.RunAt, &j.CreatedAt, &j.FinishedAt, &result, &errorJSON, &worker, &j.LeaseExpiresAt, &j.CancelRequestedAt,
			&progress, &redrivenFrom, &redrivenTo, &seq, &j.Deadline, &timeoutMs}
		if extra != nil {
			dest = append(dest, extra)
		}
		if err := r.Scan(dest...); err != nil {
			return err
		}
		j.Payload, j.RetryPolicy, j.Result, j.Progress = payload, policy, result, progress
		j.State = JobState(state)
		j.Priority, j.MaxAttempts, j.CurrentAttempt = int(priority), int(maxAttempts), int(attempt)
		j.WorkerID, j.RedrivenFrom = deref(worker), deref(redrivenFrom)
		if timeoutMs != nil {
			j.ExecutionTimeout = time.Duration(*timeoutMs) * time.Millisecond
		}
		if errorJSON != nil {
			j.Error = &ErrorEnvelope{}
			if err := json.Unmarshal(errorJSON, j.Error); err != nil {
				return err
			}
		}
		if err := json.Unmarshal(tags, &j.Tags); err != nil {
			return err
		}
		if err := json.Unmarshal(redrivenTo, &j.RedrivenTo); err != nil {
			return err
		}
		jobs = append(jobs, j)
		return nil
	})
	return jobs, seq, err
}
