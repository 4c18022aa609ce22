package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// enqueue runs enqueue and enqueue_many with the request's wire-named options decoded by the
// SDK itself ({"inMs": n} becomes now plus n ms), and checks expectError, sameAs and (through
// EnqueueDeduped) outcome.
func (r *Runner) enqueue(ctx context.Context, a Action) error {
	var ids []string
	var err error
	if a.Do() == "enqueue" {
		var opts workhorse.EnqueueOptions
		if a["options"] != nil {
			if err := json.Unmarshal(r.withJobIDs(withTimes(a["options"])), &opts); err != nil {
				return err
			}
		}
		if a["outcome"] != nil {
			// Through EnqueueDeduped, whose outcome must be the one given.
			var res workhorse.EnqueueResult
			if res, err = r.Queue.EnqueueDeduped(ctx, a.str("type"), json.RawMessage(orNull(a["payload"])), &opts); err == nil {
				if string(res.Outcome) != a.str("outcome") {
					return fmt.Errorf("enqueue answered %s, want %s", res.Outcome, a.str("outcome"))
				}
				ids = []string{res.JobID}
			}
		} else {
			var id string
			if id, err = r.Queue.Enqueue(ctx, a.str("type"), json.RawMessage(orNull(a["payload"])), &opts); err == nil {
				ids = []string{id}
			}
		}
	} else {
		var wires []json.RawMessage
		if err := json.Unmarshal(a["requests"], &wires); err != nil {
			return err
		}
		requests := make([]workhorse.EnqueueRequest, len(wires))
		for i, wire := range wires {
			if err := json.Unmarshal(r.withJobIDs(withTimes(wire)), &requests[i]); err != nil {
				return err
			}
		}
		ids, err = r.Queue.EnqueueMany(ctx, requests)
	}
	if a["expectError"] != nil {
		if err == nil {
			return fmt.Errorf("expected %s, got ids %v", a["expectError"], ids)
		}
		return r.expectError(err, a["expectError"])
	}
	if err != nil {
		return err
	}
	if a["sameAs"] != nil {
		if want, err := r.id(a, "sameAs"); err != nil || ids[0] != want {
			return fmt.Errorf("enqueue returned %s, want job %s (%s): %v", ids[0], a.str("sameAs"), want, err)
		}
	}
	names := []string{}
	if a.Do() == "enqueue" && a.str("job") != "" {
		names = []string{a.str("job")}
	} else if a["jobs"] != nil {
		if err := json.Unmarshal(a["jobs"], &names); err != nil {
			return err
		}
	}
	for i, name := range names {
		r.jobs[name] = ids[i]
	}
	return nil
}

// withTimes replaces {"inMs": n} values of an options object by the time n ms from now.
func withTimes(options json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(options, &fields) != nil {
		return options
	}
	for key, value := range fields {
		var relative struct {
			InMs *int64 `json:"inMs"`
		}
		if json.Unmarshal(value, &relative) == nil && relative.InMs != nil {
			at := time.Now().Add(time.Duration(*relative.InMs) * time.Millisecond).UTC().Format(time.RFC3339Nano)
			fields[key], _ = json.Marshal(at)
		}
	}
	out, _ := json.Marshal(fields)
	return out
}

func (r *Runner) expectError(err error, expected json.RawMessage) error {
	var want struct {
		Kind        string   `json:"kind"`
		Field       string   `json:"field"`
		Fields      []string `json:"fields"`
		ExistingJob string   `json:"existingJob"`
		State       string   `json:"state"`
	}
	if e := json.Unmarshal(expected, &want); e != nil {
		return e
	}
	if want.Kind == "action_refused" {
		// An operator action refused for the job's state names the state, not a field.
		var refused *workhorse.JobActionRefusedError
		if !errors.As(err, &refused) || refused.State != want.State {
			return fmt.Errorf("got %T %v, want an action_refused error naming %q", err, err, want.State)
		}
		return nil
	}
	var invalid *workhorse.ValidationError
	var conflict *workhorse.IdempotencyConflictError
	var unknown *workhorse.UnknownDependencyError
	var notAllowed *workhorse.DecisionNotAllowedError
	isConflict := errors.As(err, &conflict)
	// The kinds are distinct: the most specific one the error is.
	kind := ""
	switch {
	case isConflict:
		kind = "idempotency_conflict"
	case errors.As(err, &unknown):
		kind = "unknown_dependency"
	case errors.As(err, &notAllowed):
		kind = "decision_not_allowed"
	case errors.As(err, &invalid):
		kind = "validation"
	}
	switch want.Kind {
	case "idempotency_conflict", "unknown_dependency", "decision_not_allowed", "validation":
	default:
		return fmt.Errorf("unknown error kind %q", want.Kind)
	}
	if kind != want.Kind {
		return fmt.Errorf("got %T %v, want a %s error", err, err, want.Kind)
	}
	errors.As(err, &invalid)
	if invalid.Field != want.Field {
		return fmt.Errorf("the error names %q, want %q (%v)", invalid.Field, want.Field, err)
	}
	if isConflict && want.Fields != nil && !slices.Equal(conflict.Fields, want.Fields) {
		return fmt.Errorf("differing fields %v, want %v", conflict.Fields, want.Fields)
	}
	if isConflict && want.ExistingJob != "" && conflict.ExistingJobID != r.jobs[want.ExistingJob] {
		return fmt.Errorf("existing job %s, want job %s", conflict.ExistingJobID, want.ExistingJob)
	}
	return nil
}

// expectJob compares the snapshot's fields with every key the action gives, by wire name.
func (r *Runner) expectJob(ctx context.Context, a Action) error {
	id, err := r.id(a, "job")
	if err != nil {
		return err
	}
	job, err := r.Admin.GetJob(ctx, id)
	if err != nil || job == nil {
		return fmt.Errorf("job %s: %v", a.str("job"), err)
	}
	var timeout any
	if job.ExecutionTimeout != 0 {
		timeout = job.ExecutionTimeout.Milliseconds()
	}
	var deadline any = job.Deadline != nil
	fields := map[string]any{
		"state": string(job.State), "currentAttempt": job.CurrentAttempt, "maxAttempts": job.MaxAttempts,
		"priority": job.Priority, "queue": job.Queue, "type": job.Type, "executionTimeoutMs": timeout,
		"payload": job.Payload, "result": job.Result, "progress": job.Progress, "retryPolicy": job.RetryPolicy,
		"tags": job.Tags, "hasDeadline": deadline, "concurrencyKey": nil,
	}
	if job.ConcurrencyKey != "" {
		fields["concurrencyKey"] = job.ConcurrencyKey
	}
	for key, want := range a {
		switch key {
		case "do", "job":
			continue
		case "error":
			if err := expectEnvelope(job.Error, want); err != nil {
				return err
			}
		case "redrivenFrom":
			from, err := r.id(a, key)
			if err != nil || job.RedrivenFrom != from {
				return fmt.Errorf("redrivenFrom %s, want job %s (%s): %v", job.RedrivenFrom, a.str(key), from, err)
			}
		default:
			if known, err := r.expectLineage(job, key, want); known {
				if err != nil {
					return err
				}
				continue
			}
			got, known := fields[key]
			if !known {
				return fmt.Errorf("expect_job has no key %q", key)
			}
			if !sameJSON(got, want) {
				text, _ := json.Marshal(got)
				return fmt.Errorf("%s: %s, want %s", key, text, want)
			}
		}
	}
	return nil
}

func expectEnvelope(got *workhorse.ErrorEnvelope, want json.RawMessage) error {
	if string(want) == "null" {
		if got != nil {
			return fmt.Errorf("error %+v, want none", *got)
		}
		return nil
	}
	var w struct {
		Name    *string `json:"name"`
		Message *string `json:"message"`
		Stack   bool    `json:"stack"`
	}
	if err := json.Unmarshal(want, &w); err != nil {
		return err
	}
	switch {
	case got == nil:
		return fmt.Errorf("no error, want %s", want)
	case w.Name != nil && got.Name != *w.Name, w.Message != nil && got.Message != *w.Message:
		return fmt.Errorf("error %s: %s, want %s", got.Name, got.Message, want)
	case w.Stack && strings.TrimSpace(got.Stack) == "":
		return fmt.Errorf("error %s has no stack", got.Name)
	}
	return nil
}

// sameJSON compares a Go value (json.RawMessage as JSON, nil as null) with JSON by value.
func sameJSON(got any, want json.RawMessage) bool {
	data, err := json.Marshal(got)
	if raw, ok := got.(json.RawMessage); ok && raw == nil {
		data, err = []byte("null"), nil
	}
	var a, b any
	return err == nil && json.Unmarshal(data, &a) == nil && json.Unmarshal(want, &b) == nil && reflect.DeepEqual(a, b)
}

func (r *Runner) expectTimeline(ctx context.Context, a Action) error {
	id, err := r.id(a, "job")
	if err != nil {
		return err
	}
	var want []string
	if err := json.Unmarshal(a["entries"], &want); err != nil {
		return err
	}
	var got []string
	cursor := ""
	for {
		page, err := r.Admin.GetJobTimeline(ctx, id, workhorse.TimelineOptions{Limit: 5, Cursor: cursor})
		if err != nil {
			return err
		}
		for _, e := range page.Items {
			got = append(got, e.Source+":"+e.Kind)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("timeline %v, want %v", got, want)
	}
	return nil
}
