package workhorse

import (
	"context"
	"encoding/json"
	"time"
)

// SignalStatus is what Queue.SendSignal answers.
type SignalStatus string

const (
	// SignalDelivered: the job was parked on a wait for the name and is now `ready`.
	SignalDelivered SignalStatus = "delivered"
	// SignalBuffered: the job is live but not waiting for it yet; its next wait for the name takes it.
	SignalBuffered SignalStatus = "buffered"
	// SignalDuplicate: a signal with this idempotency key was sent to the job under this name before.
	SignalDuplicate SignalStatus = "duplicate"
	// SignalNotFound: no such job.
	SignalNotFound SignalStatus = "not_found"
	// SignalFinished: the job has ended.
	SignalFinished SignalStatus = "finished"
)

// SignalOptions are the options of Queue.SendSignal.
type SignalOptions struct {
	// IdempotencyKey (1 to 200 characters): a repeat with the same key, for the same job and
	// name, writes nothing and answers SignalDuplicate.
	IdempotencyKey string
}

// SendSignal sends signal name (with payload, any JSON of at most 1 MiB; nil sends none) to a
// job, which Job.WaitForSignal receives. Through queue.With(tx) it joins your transaction. The
// answer says what became of it; SignalDuplicate, SignalNotFound and SignalFinished wrote
// nothing.
func (q *Queue) SendSignal(ctx context.Context, jobID, name string, payload any, o *SignalOptions) (SignalStatus, error) {
	if err := checkJobID(jobID, "jobId"); err != nil {
		return "", err
	}
	if err := checkWaitName(name, "name"); err != nil {
		return "", err
	}
	var data any
	if payload != nil {
		encoded, err := toJSON(payload, "payload", maxJSONBytes)
		if err != nil {
			return "", err
		}
		data = string(encoded)
	}
	var key any
	if o != nil && o.IdempotencyKey != "" {
		if err := checkWaitName(o.IdempotencyKey, "idempotencyKey"); err != nil {
			return "", err
		}
		key = o.IdempotencyKey
	}
	if err := q.schema.check(ctx, q.db); err != nil {
		return "", err
	}
	s, err := status(ctx, q.db, sendSignalSQL, jobID, name, data, key)
	return SignalStatus(s), err
}

// HumanWaitStatus is what Queue.CompleteHumanWait answers.
type HumanWaitStatus string

const (
	// HumanWaitCompleted: the decision is recorded and the job is `ready`.
	HumanWaitCompleted HumanWaitStatus = "completed"
	// HumanWaitDuplicate: the wait was decided with this idempotency key before.
	HumanWaitDuplicate HumanWaitStatus = "duplicate"
	// HumanWaitAlreadyDecided: decided otherwise before.
	HumanWaitAlreadyDecided HumanWaitStatus = "already_decided"
	// HumanWaitTimedOut: the wait's timeout passed (by the database's clock, even if the job has
	// not woken to see it yet); nothing was recorded.
	HumanWaitTimedOut HumanWaitStatus = "timed_out"
	// HumanWaitNotWaiting: the job is live but has not reached that wait yet.
	HumanWaitNotWaiting HumanWaitStatus = "not_waiting"
	// HumanWaitNotFound: no such job.
	HumanWaitNotFound HumanWaitStatus = "not_found"
	// HumanWaitFinished: the job has ended.
	HumanWaitFinished HumanWaitStatus = "finished"
)

// DecisionOptions say who decided a human wait, and why.
type DecisionOptions struct {
	// Actor is who decided (required, 1 to 200 characters).
	Actor string
	// Reason is why (at most 1000 characters).
	Reason string
	// IdempotencyKey (1 to 200 characters): a repeat after the decision answers HumanWaitDuplicate.
	IdempotencyKey string
}

// CompleteHumanWait records the decision (any JSON of at most 64 KiB; one of the wait's choices
// when it has them) for the wait name of a job, and wakes the job. A decision that is not one of
// the choices returns a *DecisionNotAllowedError and writes nothing. Through queue.With(tx) it
// joins your transaction.
func (q *Queue) CompleteHumanWait(ctx context.Context, jobID, name string, decision any, o DecisionOptions) (HumanWaitStatus, error) {
	if err := checkJobID(jobID, "jobId"); err != nil {
		return "", err
	}
	if err := checkWaitName(name, "name"); err != nil {
		return "", err
	}
	data, err := toJSON(decision, "decision", maxJSONBytes)
	if err != nil {
		return "", err
	}
	if err := checkActor(ActorOptions{Actor: o.Actor, Reason: o.Reason}); err != nil {
		return "", err
	}
	var key any
	if o.IdempotencyKey != "" {
		if err := checkWaitName(o.IdempotencyKey, "idempotencyKey"); err != nil {
			return "", err
		}
		key = o.IdempotencyKey
	}
	if err := q.schema.check(ctx, q.db); err != nil {
		return "", err
	}
	s, err := status(ctx, q.db, completeHumanWaitSQL,
		jobID, name, string(data), o.Actor, nullable(o.Reason), key)
	return HumanWaitStatus(s), err
}

// checkWaitName: a signal or wait name or key as text can hold it; its length is the SQL
// functions' to check (check_wait_name, check_wait_key).
func checkWaitName(value, field string) error {
	return checkText(value, field)
}

// HumanWait is an open wait for a person's decision, as Admin.ListHumanWaits lists it.
type HumanWait struct {
	JobID string
	Queue string
	Type  string
	Name  string
	// Context is what the person deciding needs to see (nil when none was given).
	Context json.RawMessage
	// Choices are the allowed decisions (nil: any JSON value).
	Choices   []string
	TimeoutAt *time.Time
	Attempt   int
	CreatedAt time.Time
}

// HumanWaitFilter filters and pages Admin.ListHumanWaits; zero fields filter nothing.
type HumanWaitFilter struct {
	Queue string
	Type  string
	// Name is the wait's name.
	Name  string
	JobID string
	// Limit is 1 to 1000 (default 50).
	Limit  int
	Cursor string
}

// ListHumanWaits pages the open human waits of live jobs, oldest first.
func (a *Admin) ListHumanWaits(ctx context.Context, f HumanWaitFilter) (Page[HumanWait], error) {
	var page Page[HumanWait]
	queue, typ, err := optionalNames(f.Queue, f.Type)
	if err != nil {
		return page, err
	}
	var name, jobID any
	if f.Name != "" {
		if err := checkWaitName(f.Name, "name"); err != nil {
			return page, err
		}
		name = f.Name
	}
	if f.JobID != "" {
		if err := checkJobID(f.JobID, "jobId"); err != nil {
			return page, err
		}
		jobID = f.JobID
	}
	limit, err := limitOf(f.Limit, 50)
	if err != nil {
		return page, err
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return page, err
	}
	page.Items = []HumanWait{}
	err = queryAll(ctx, a.db, listHumanWaitsSQL,
		[]any{queue, typ, name, jobID, limit, nullable(f.Cursor)}, func(r rows) error {
			var w HumanWait
			var context, choices []byte
			var attempt int64
			var next string
			if err := r.Scan(&w.JobID, &w.Queue, &w.Type, &w.Name, &context, &choices, &w.TimeoutAt, &attempt, &w.CreatedAt, &next); err != nil {
				return err
			}
			w.Context, w.Attempt = context, int(attempt)
			if choices != nil {
				if err := json.Unmarshal(choices, &w.Choices); err != nil {
					return err
				}
			}
			page.Items = append(page.Items, w)
			page.NextCursor = next
			return nil
		})
	return page, err
}
