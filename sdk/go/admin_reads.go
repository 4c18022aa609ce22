package workhorse

import (
	"context"
	"encoding/json"
	"time"
)

// The operator's reads of one job's inner state (checkpoints, signals, waits), of the queues'
// recent activity and of the operator changes. The server checks their input (typed errors
// naming the field); here only what the wire cannot carry as given.

// CheckpointEntry is a checkpoint a job saved (workhorse.Checkpoint), as ListCheckpoints lists it.
type CheckpointEntry struct {
	Name string
	// Value is the stored value as JSON (nil for a stage that returned nothing).
	Value     json.RawMessage
	Attempt   int
	WorkerID  string
	CreatedAt time.Time
}

// JobSignal is a signal sent to a job (Queue.SendSignal), as ListJobSignals lists it.
type JobSignal struct {
	// ID is the signal's number (send order across all jobs).
	ID      string
	Name    string
	Payload json.RawMessage
	// Status is "buffered" until a wait for its name consumes it, then "consumed".
	Status string
	// WaitSeq is the number of the wait that consumed it among the job's waits for this name (nil while buffered).
	WaitSeq *int
	SentAt  time.Time
}

// JobWait is a wait a job's handler reached, as ListJobWaits lists it.
type JobWait struct {
	// Kind is "signal" (WaitForSignal) or "human" (Job.WaitForHuman).
	Kind string
	Name string
	// Seq is a signal wait's number among the waits for this name in a run (a human wait is 1).
	Seq int
	// Status is "open", "delivered", "decided" or "timed_out".
	Status     string
	TimeoutAt  *time.Time
	Attempt    int
	CreatedAt  time.Time
	ResolvedAt *time.Time
	// SignalID is the signal that answered a signal wait ("" otherwise).
	SignalID string
	// A human wait's context, choices and, once decided, its decision, actor and reason.
	Context  json.RawMessage
	Choices  []string
	Decision json.RawMessage
	Actor    string
	Reason   string
}

// JobWaitsOptions are the options of ListJobSignals and ListJobWaits.
type JobWaitsOptions struct {
	// Limit: at most this many, the newest first: 1 to 1000 (0: 100).
	Limit int
}

// QueueActivityOptions: the window and the bucket size of QueueActivity.
type QueueActivityOptions struct {
	// Since is the window's start, within the last 31 days.
	Since time.Time
	// Bucket is the bucket size, whole seconds from 1 s to 24 h.
	Bucket time.Duration
}

// QueueActivity is how many jobs of a queue finished in one time bucket, by terminal state.
type QueueActivity struct {
	Queue     string
	Bucket    time.Time
	Succeeded int
	Failed    int
	Canceled  int
}

// OperatorChangeFilter filters and pages ListOperatorChanges: newest first, Limit rows (0: 100,
// at most 1000) with ids below BeforeID (the last row's ID, to read on).
type OperatorChangeFilter struct {
	// Kind: "queue_paused", "queue_resumed", "queue_policy_set", "worker_drain_requested" or "retention_set" ("" for any).
	Kind string
	// Subject: the queue or worker id it is about ("" for any).
	Subject  string
	Limit    int
	BeforeID string
}

// OperatorChange is one operator change of a setting kept in place (a queue's pause state or
// policy, a drain request, the retention policy), as recorded when it was made.
type OperatorChange struct {
	ID   string
	At   time.Time
	Kind string
	// Subject is the queue or worker id it is about ("" for the retention policy).
	Subject string
	Actor   string
	Reason  string
	// LoginRole is the login role (session_user) of the session that made it.
	LoginRole string
	// Detail is what was set (the queue policy in force, the retention settings given) as JSON, or nil.
	Detail json.RawMessage
}

// ListCheckpoints returns the checkpoints a job saved, oldest first, with their stored values.
func (a *Admin) ListCheckpoints(ctx context.Context, jobID string) ([]CheckpointEntry, error) {
	if err := a.readyFor(ctx, jobID); err != nil {
		return nil, err
	}
	list := []CheckpointEntry{}
	err := queryAll(ctx, a.db, readCheckpointsSQL, []any{jobID}, func(r rows) error {
		var c CheckpointEntry
		var attempt int64
		var value []byte
		err := r.Scan(&c.Name, &value, &attempt, &c.WorkerID, &c.CreatedAt)
		c.Value, c.Attempt = value, int(attempt)
		list = append(list, c)
		return err
	})
	return list, err
}

// ListJobSignals returns the signals sent to a job, the newest first: each "buffered" until a
// wait for its name consumes it, then "consumed".
func (a *Admin) ListJobSignals(ctx context.Context, jobID string, o JobWaitsOptions) ([]JobSignal, error) {
	if err := a.readyFor(ctx, jobID); err != nil {
		return nil, err
	}
	list := []JobSignal{}
	err := queryAll(ctx, a.db, jobSignalsSQL, []any{jobID, defaultLimit(o.Limit, 100)}, func(r rows) error {
		var s JobSignal
		var payload []byte
		var seq *int64
		err := r.Scan(&s.ID, &s.Name, &payload, &s.Status, &seq, &s.SentAt)
		s.Payload = payload
		if seq != nil {
			n := int(*seq)
			s.WaitSeq = &n
		}
		list = append(list, s)
		return err
	})
	return list, err
}

// ListJobWaits returns the waits a job's handler reached, the newest first: signal waits and
// human waits, open or answered, with their deadlines, and a human wait's context, choices and
// decision.
func (a *Admin) ListJobWaits(ctx context.Context, jobID string, o JobWaitsOptions) ([]JobWait, error) {
	if err := a.readyFor(ctx, jobID); err != nil {
		return nil, err
	}
	list := []JobWait{}
	err := queryAll(ctx, a.db, jobWaitsSQL, []any{jobID, defaultLimit(o.Limit, 100)}, func(r rows) error {
		var w JobWait
		var seq, attempt int64
		var signalID, actor, reason *string
		var waitContext, choices, decision []byte
		err := r.Scan(&w.Kind, &w.Name, &seq, &w.Status, &w.TimeoutAt, &attempt, &w.CreatedAt, &w.ResolvedAt, &signalID,
			&waitContext, &choices, &decision, &actor, &reason)
		if err != nil {
			return err
		}
		w.Seq, w.Attempt = int(seq), int(attempt)
		w.SignalID, w.Actor, w.Reason = deref(signalID), deref(actor), deref(reason)
		w.Context, w.Decision = waitContext, decision
		if choices != nil {
			if err := json.Unmarshal(choices, &w.Choices); err != nil {
				return err
			}
		}
		list = append(list, w)
		return nil
	})
	return list, err
}

// QueueActivity returns how many jobs finished per queue and time bucket since o.Since, by
// terminal state (buckets without any are left out). Its cost is that of the jobs finished in
// the window.
func (a *Admin) QueueActivity(ctx context.Context, o QueueActivityOptions) ([]QueueActivity, error) {
	var since any
	if !o.Since.IsZero() {
		text, err := checkTime(o.Since, "since")
		if err != nil {
			return nil, err
		}
		since = text
	}
	if o.Bucket%time.Second != 0 {
		return nil, invalid("bucketSeconds", "must be an integer from 1 to 86400")
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return nil, err
	}
	list := []QueueActivity{}
	err := queryAll(ctx, a.db, queueActivitySQL, []any{since, int64(o.Bucket / time.Second)}, func(r rows) error {
		var q QueueActivity
		var succeeded, failed, canceled int64
		err := r.Scan(&q.Queue, &q.Bucket, &succeeded, &failed, &canceled)
		q.Succeeded, q.Failed, q.Canceled = int(succeeded), int(failed), int(canceled)
		list = append(list, q)
		return err
	})
	return list, err
}

// ListOperatorChanges returns the operator changes of the settings kept in place (queue pause
// and resume, queue policies, drain requests, the retention policy), newest first: each with
// the caller-chosen actor and reason and the login role of the session that made it.
func (a *Admin) ListOperatorChanges(ctx context.Context, f OperatorChangeFilter) ([]OperatorChange, error) {
	if f.BeforeID != "" && !decimalID(f.BeforeID) {
		return nil, invalid("beforeId", "must be the id of an operator change (a decimal string)")
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return nil, err
	}
	list := []OperatorChange{}
	err := queryAll(ctx, a.db, listOperatorChangesSQL,
		[]any{nullable(f.Kind), nullable(f.Subject), defaultLimit(f.Limit, 100), nullable(f.BeforeID)}, func(r rows) error {
			var c OperatorChange
			var subject, actor, reason *string
			var detail []byte
			err := r.Scan(&c.ID, &c.At, &c.Kind, &subject, &actor, &reason, &c.LoginRole, &detail)
			c.Subject, c.Actor, c.Reason, c.Detail = deref(subject), deref(actor), deref(reason), detail
			list = append(list, c)
			return err
		})
	return list, err
}

// readyFor checks a job id (its form: the wire carries a UUID) and the schema.
func (a *Admin) readyFor(ctx context.Context, jobID string) error {
	if err := checkJobID(jobID, "jobId"); err != nil {
		return err
	}
	return a.schema.check(ctx, a.db)
}

// defaultLimit is limit, or byDefault for 0; the server checks the range.
func defaultLimit(limit, byDefault int) int {
	if limit == 0 {
		return byDefault
	}
	return limit
}

func decimalID(s string) bool {
	if len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// CompleteHumanWait records an operator's decision for a job's open human wait, as
// Queue.CompleteHumanWait does (same checks and answers), with the operator's rights.
func (a *Admin) CompleteHumanWait(ctx context.Context, jobID, name string, decision any, o DecisionOptions) (HumanWaitStatus, error) {
	return (&Queue{db: a.db, schema: a.schema}).CompleteHumanWait(ctx, jobID, name, decision, o)
}
