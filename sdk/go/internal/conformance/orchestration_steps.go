package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// orchestrationStep runs one of the orchestration steps (README, scenarios 014 on) and returns
// the value it keeps under step.As; handled is false for any other step. The SDK's
// *JobBlockedError goes through as an error.
func orchestrationStep(ctx context.Context, job *workhorse.Job, step Step) (value any, handled bool, err error) {
	switch step.Do {
	case "dependencies":
		deps, err := job.Dependencies(ctx)
		if err != nil {
			return nil, true, err
		}
		list := make([]map[string]any, len(deps))
		for i, d := range deps {
			list[i] = map[string]any{"state": d.State, "result": orNull(d.Result)}
		}
		return list, true, nil
	case "run_child":
		result, err := workhorse.RunChild[json.RawMessage](ctx, job, step.Key, step.Type, orNull(step.Payload), nil)
		var failed *workhorse.ChildJobFailedError
		if errors.As(err, &failed) {
			return map[string]any{"childFailed": failed.ChildState, "errorName": failed.ChildError.Name}, true, nil
		}
		return orNull(result), true, err
	case "run_children":
		requests := make([]workhorse.EnqueueRequest, len(step.Children))
		for i, c := range step.Children {
			requests[i] = workhorse.EnqueueRequest{Type: c.Type, Payload: orNull(c.Payload), EnqueueOptions: c.Options}
		}
		outcomes, err := workhorse.RunChildren[json.RawMessage](ctx, job, step.Key, requests)
		if err != nil {
			return nil, true, err
		}
		list := make([]map[string]any, len(outcomes))
		for i, o := range outcomes {
			var name any
			if o.Error != nil {
				name = o.Error.Name
			}
			list[i] = map[string]any{"state": o.State, "result": orNull(o.Result), "errorName": name}
		}
		return list, true, nil
	case "wait_signal":
		var o *workhorse.WaitOptions
		if step.TimeoutMs > 0 {
			o = &workhorse.WaitOptions{Timeout: time.Duration(step.TimeoutMs) * time.Millisecond}
		}
		payload, err := workhorse.WaitForSignal[json.RawMessage](ctx, job, step.Name, o)
		var timedOut *workhorse.SignalTimeoutError
		if step.OnTimeout != nil && errors.As(err, &timedOut) {
			return step.OnTimeout, true, nil
		}
		return orNull(payload), true, err
	case "wait_human":
		o := &workhorse.HumanWaitOptions{Choices: step.Choices}
		if step.Context != nil {
			o.Context = step.Context
		}
		if step.TimeoutMs > 0 {
			o.Timeout = time.Duration(step.TimeoutMs) * time.Millisecond
		}
		d, err := job.WaitForHuman(ctx, step.Name, o)
		if err != nil {
			return nil, true, err
		}
		var reason any
		if d.Reason != "" {
			reason = d.Reason
		}
		return map[string]any{"decision": orNull(d.Decision), "actor": d.Actor, "reason": reason}, true, nil
	}
	return nil, false, nil
}
