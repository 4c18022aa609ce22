package workhorse

import (
	"context"
	"encoding/json"
	"strconv"

	"go.opentelemetry.io/otel/trace"
)

// ChildOutcome is how one child job of RunChildren ended.
type ChildOutcome[R any] struct {
	JobID string `json:"jobId"`
	// State is StateSucceeded, StateFailed or StateCanceled.
	State JobState `json:"state"`
	// Result is the child's result decoded into R, when it succeeded.
	Result R `json:"result"`
	// Error is the child's terminal error envelope, when it failed or was canceled.
	Error *ErrorEnvelope `json:"error"`
}

// RunChild starts one child job and waits for it without holding a worker slot: the child is
// enqueued and this job parks in `blocked` in one transaction, and RunChild returns a
// *JobBlockedError, which the handler must return. When the child ends, the handler runs again
// from the top and RunChild returns the child's result, or a *ChildJobFailedError if it failed
// or was canceled (the handler may handle it, to compensate). key names the call within the
// job: a replay finds the child it started; asking for another type or payload under the same
// key is a *ChildJobConflictError. opts may not hold dependency options.
//
//	receipt, err := workhorse.RunChild[Receipt](ctx, job, "charge", "payment.charge", Charge{OrderID: order.ID}, nil)
func RunChild[R any](ctx context.Context, job *Job, key, jobType string, payload any, opts *EnqueueOptions) (R, error) {
	request := EnqueueRequest{Type: jobType, Payload: payload}
	if opts != nil {
		request.EnqueueOptions = *opts
	}
	var result R
	outcomes, err := RunChildren[R](ctx, job, key, []EnqueueRequest{request})
	if err != nil {
		return result, err
	}
	o := outcomes[0]
	if o.State != StateSucceeded {
		failed := &ChildJobFailedError{ChildID: o.JobID, ChildState: o.State}
		if o.Error != nil {
			failed.ChildError = *o.Error
		}
		return result, failed
	}
	return o.Result, nil
}

// RunChildren starts 1 to 1000 child jobs at once and waits for all of them (as RunChild), and
// returns every child's outcome in the order given, whether it succeeded or not. Each child's
// result is decoded into R.
func RunChildren[R any](ctx context.Context, job *Job, key string, children []EnqueueRequest) ([]ChildOutcome[R], error) {
	if err := checkWaitName(key, "key"); err != nil {
		return nil, err
	}
	if len(children) < 1 || len(children) > maxBatch {
		return nil, invalid("children", "must be an array of 1 to 1000 child job requests")
	}
	body := []byte{'['}
	traced := traceSend(ctx)
	for i := range children {
		c := &children[i]
		// (Dependency options are refused by run_children_v1, naming children[i].dependsOn.)
		path := "children[" + strconv.Itoa(i) + "]."
		if i > 0 {
			body = append(body, ',')
		}
		var err error
		if body, err = wireRequest(body, c.Type, c.Payload, &c.EnqueueOptions, path); err != nil {
			return nil, err
		}
		traced.add(c.Queue, c.Type, len(body))
	}
	body = append(body, ']')
	var outcomes []ChildOutcome[R]
	var s string
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	var span trace.Span
	if traced != nil {
		// The children store the trace context of this PRODUCER span, under the attempt's span.
		ctx, span, body = traced.start(ctx, body)
	}
	var childIDs []string
	err := queryAll(context.WithoutCancel(ctx), job.w.db, runChildrenSQL,
		[]any{job.ID, job.WorkerID, job.FenceToken, key, string(body)}, func(r rows) error {
			var id, state *string
			var result, envelope []byte
			if err := r.Scan(&s, &id, &state, &result, &envelope); err != nil {
				return err
			}
			if span != nil && id != nil {
				childIDs = append(childIDs, *id)
			}
			if s != "settled" {
				return nil
			}
			o := ChildOutcome[R]{JobID: deref(id), State: JobState(deref(state))}
			var err error
			if o.Error, err = decodeEnvelope(envelope); err != nil {
				return err
			}
			if o.State == StateSucceeded && result != nil {
				if err := json.Unmarshal(result, &o.Result); err != nil {
					return err
				}
			}
			outcomes = append(outcomes, o)
			return nil
		})
	if span != nil {
		endSend(span, childIDs, err)
	}
	// enqueue_many_v1's names ("requests[2].priority") as the caller gave them ("children[2].priority").
	err = renamedRequestError(err, func(i string) string { return "children[" + i + "]" })
	if err := job.fenced(s, err); err != nil {
		return nil, err
	}
	if s != "settled" {
		return nil, job.parked(s, "children", key, nil)
	}
	return outcomes, nil
}
