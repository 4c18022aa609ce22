package workhorse

import (
	"context"
	"encoding/json"
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

// GetJob returns the job's snapshot, or nil when no such job exists.
func (a *Admin) GetJob(ctx context.Context, jobID string) (*JobSnapshot, error) {
	if err := checkJobID(jobID, "jobId"); err != nil {
		return nil, err
	}
	var key string
	jobs, _, err := a.snapshots(ctx, getJobSQL, []any{jobID}, &key)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	jobs[0].ConcurrencyKey = key
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
	err = queryAll(ctx, a.db, timelineSQL,
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
	page.Items, _, err = a.snapshots(ctx, listJobsSQL,
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
	if err := checkText(reason, "reason"); err != nil {
		return "", err
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return "", err
	}
	s, err := status(ctx, a.db, cancelSQL, jobID, nullable(reason))
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
	page.Items, _, err = a.snapshots(ctx, listDeadLettersSQL,
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
	if err := checkRedrive(o.RequestID, o.ActorOptions); err != nil {
		return "", err
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return "", err
	}
	var id string
	err := queryRow(ctx, a.db, redriveSQL,
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
	if err := checkRedrive(o.RequestID, o.ActorOptions); err != nil {
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
	err = queryAll(ctx, a.db, redriveManySQL,
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
	return a.setPaused(ctx, pauseQueueSQL, queue, o)
}

// ResumeQueue resumes a paused queue and wakes its workers.
func (a *Admin) ResumeQueue(ctx context.Context, queue string, o ActorOptions) (QueueInfo, error) {
	return a.setPaused(ctx, resumeQueueSQL, queue, o)
}

// ListQueues lists every queue with live jobs or a pause record.
func (a *Admin) ListQueues(ctx context.Context) ([]QueueInfo, error) {
	if err := a.schema.check(ctx, a.db); err != nil {
		return nil, err
	}
	return a.queues(ctx, listQueuesSQL, nil)
}

func (a *Admin) setPaused(ctx context.Context, statement, queue string, o ActorOptions) (QueueInfo, error) {
	if err := checkText(queue, "queue"); err != nil {
		return QueueInfo{}, err
	}
	if err := checkActor(o); err != nil {
		return QueueInfo{}, err
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return QueueInfo{}, err
	}
	var ignored []byte
	if err := queryRow(ctx, a.db, statement, []any{queue, nullable(o.Actor), nullable(o.Reason)}, &ignored); err != nil {
		return QueueInfo{}, err
	}
	list, err := a.queues(ctx, getQueueSQL, []any{queue})
	if err != nil || len(list) == 0 {
		return QueueInfo{Queue: queue}, err
	}
	return list[0], nil
}

func (a *Admin) queues(ctx context.Context, statement string, args []any) ([]QueueInfo, error) {
	list := []QueueInfo{}
	err := queryAll(ctx, a.db, statement,
		args, func(r rows) error {
			var q QueueInfo
			var by, role, reason *string
			var ready, scheduled, active, blocked int64
			err := r.Scan(&q.Queue, &q.Paused, &q.ChangedAt, &by, &role, &reason, &ready, &scheduled, &active, &blocked)
			q.ChangedBy, q.LoginRole, q.Reason = deref(by), deref(role), deref(reason)
			q.Ready, q.Scheduled, q.Active, q.Blocked = int(ready), int(scheduled), int(active), int(blocked)
			list = append(list, q)
			return err
		})
	return list, err
}

// snapshots runs a query over jobRowColumns (plus, when extra is given, one more text column
// whose last value it keeps) and returns the jobs and the last row's seq.
func (a *Admin) snapshots(ctx context.Context, sql string, args []any, extra *string) ([]JobSnapshot, int64, error) {
	if err := a.schema.check(ctx, a.db); err != nil {
		return nil, 0, err
	}
	jobs := []JobSnapshot{}
	var seq int64
	err := queryAll(ctx, a.db, sql, args, func(r rows) error {
		j, err := scanJobRow(r, &seq, extra)
		if err == nil {
			jobs = append(jobs, j)
		}
		return err
	})
	return jobs, seq, err
}
