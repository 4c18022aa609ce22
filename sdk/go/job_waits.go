package workhorse

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// WaitOptions are the options of WaitForSignal.
type WaitOptions struct {
	// Timeout (1 ms to one year, whole milliseconds; zero: none), counted from the first time
	// the wait is reached: then the wait returns a *SignalTimeoutError.
	Timeout time.Duration
}

// WaitForSignal waits for the signal name that Queue.SendSignal sends to this job, and returns
// its payload decoded into T (T's zero value when the signal had none). A signal sent before
// the wait was reached is kept and returned at once. While none has arrived the job parks
// (`blocked`, or `scheduled` until the timeout) without holding a worker slot or consuming an
// attempt, and WaitForSignal returns a *JobBlockedError, which the handler must return; the
// handler runs again from the top when the signal arrives, and the call then returns it. The
// n-th wait for a name in a run takes the n-th signal of that name the job consumes.
//
//	shipment, err := workhorse.WaitForSignal[Shipment](ctx, job, "shipped", &workhorse.WaitOptions{Timeout: 7 * 24 * time.Hour})
//	var timedOut *workhorse.SignalTimeoutError
//	if errors.As(err, &timedOut) {
//		return Result{Shipped: false}, nil
//	} else if err != nil {
//		return Result{}, err // a *JobBlockedError among others: let it through
//	}
func WaitForSignal[T any](ctx context.Context, job *Job, name string, o *WaitOptions) (T, error) {
	var value T
	if err := checkWaitName(name, "name"); err != nil {
		return value, err
	}
	timeoutMs, err := waitTimeout(o)
	if err != nil {
		return value, err
	}
	job.mu.Lock()
	if job.signalWaits == nil {
		job.signalWaits = map[string]int{}
	}
	job.signalWaits[name]++
	seq := job.signalWaits[name]
	job.mu.Unlock()
	var s string
	var payload []byte
	var timeoutAt *time.Time
	err = job.ownerCall(ctx, waitSignalSQL,
		[]any{name, seq, timeoutMs}, &s, &payload, &timeoutAt)
	if err != nil {
		return value, err
	}
	switch s {
	case "delivered":
		if payload != nil {
			err = json.Unmarshal(payload, &value)
		}
		return value, err
	case "timed_out":
		return value, &SignalTimeoutError{JobID: job.ID, SignalName: name, TimeoutAt: deref(timeoutAt)}
	}
	return value, job.parked(s, "signal", name, timeoutAt)
}

// HumanWaitOptions are the options of Job.WaitForHuman.
type HumanWaitOptions struct {
	// Context is what the person deciding needs to see (any JSON, at most 1 MiB; nil: none).
	Context any
	// Choices the decision must be one of (1 to 50 distinct strings; nil: any JSON value).
	Choices []string
	// Timeout (1 ms to one year; zero: none): then the wait returns a *HumanWaitTimeoutError.
	Timeout time.Duration
}

// HumanDecision is a person's answer to a human wait.
type HumanDecision struct {
	// Decision is the decision as JSON (a JSON string when the wait has choices; see Choice).
	Decision  json.RawMessage `json:"decision"`
	Actor     string          `json:"actor"`
	Reason    string          `json:"reason"`
	DecidedAt time.Time       `json:"decidedAt"`
}

// Choice is the decision as a string ("" when it is not a JSON string).
func (d HumanDecision) Choice() string {
	var s string
	_ = json.Unmarshal(d.Decision, &s)
	return s
}

// WaitForHuman waits for a person's decision on the wait name (Queue.CompleteHumanWait; open
// waits are listed by Admin.ListHumanWaits). The wait opens the first time it is reached, with
// its context, choices and timeout; later runs get the same wait. Until the decision the job
// parks as for WaitForSignal and the call returns a *JobBlockedError, which the handler must
// return. After the timeout it returns a *HumanWaitTimeoutError.
func (j *Job) WaitForHuman(ctx context.Context, name string, o *HumanWaitOptions) (HumanDecision, error) {
	var d HumanDecision
	if err := checkWaitName(name, "name"); err != nil {
		return d, err
	}
	if o == nil {
		o = &HumanWaitOptions{}
	}
	var waitContext, choices any
	if o.Context != nil {
		data, err := toJSON(o.Context, "context", maxJSONBytes)
		if err != nil {
			return d, err
		}
		waitContext = string(data)
	}
	if o.Choices != nil {
		// (How many, how long and whether distinct is wait_human_v1's to check.)
		for i, c := range o.Choices {
			if err := checkText(c, "choices["+strconv.Itoa(i)+"]"); err != nil {
				return d, err
			}
		}
		data, _ := json.Marshal(o.Choices)
		choices = string(data)
	}
	timeoutMs, err := waitTimeout(&WaitOptions{Timeout: o.Timeout})
	if err != nil {
		return d, err
	}
	var s string
	var actor, reason *string
	var decidedAt, timeoutAt *time.Time
	err = j.ownerCall(ctx, waitHumanSQL,
		[]any{name, waitContext, choices, timeoutMs}, &s, &d.Decision, &actor, &reason, &decidedAt, &timeoutAt)
	if err != nil {
		return d, err
	}
	switch s {
	case "decided":
		d.Actor, d.Reason, d.DecidedAt = deref(actor), deref(reason), deref(decidedAt)
		return d, nil
	case "timed_out":
		return d, &HumanWaitTimeoutError{JobID: j.ID, WaitName: name, TimeoutAt: deref(timeoutAt)}
	}
	return d, j.parked(s, "human", name, timeoutAt)
}

// waitTimeout is a wait's timeout in milliseconds, or nil for none.
func waitTimeout(o *WaitOptions) (any, error) {
	if o == nil || o.Timeout == 0 {
		return nil, nil
	}
	// (The range is check_wait_timeout's, in SQL: limits.json handler.waitTimeoutMs.)
	ms, err := millis(o.Timeout, "timeoutMs")
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// ownerCall runs one of the owner functions that park a job (the job id, worker id and fence
// first, then args) and scans its one row; `stale` is a *LeaseLostError.
func (j *Job) ownerCall(ctx context.Context, sql string, args []any, status *string, dest ...any) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	all := append([]any{j.ID, j.WorkerID, j.FenceToken}, args...)
	err := queryRow(context.WithoutCancel(ctx), j.w.db, sql, all, append([]any{status}, dest...)...)
	return j.fenced(*status, err)
}

// parked: the call answered `waiting` / `parked` (the job is blocked or scheduled) or
// `canceled` (a pending cancel ended it): either way the worker lets go of the job, and the
// handler must return the error.
func (j *Job) parked(status, waitingFor, name string, timeoutAt *time.Time) error {
	var reason error
	if status == "canceled" {
		reason = &JobCanceledError{JobID: j.ID}
	} else {
		reason = &JobBlockedError{JobID: j.ID, WaitingFor: waitingFor, Name: name, TimeoutAt: deref(timeoutAt)}
	}
	j.w.parkRun(j.run, reason, waitingFor)
	return reason
}
