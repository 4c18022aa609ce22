package workhorse

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// DedupeMode is how a deduplication window shares a job (see Dedupe).
type DedupeMode string

const (
	// DedupeThrottle keeps the first job of the window: an enqueue inside it writes nothing and
	// answers that job (OutcomeThrottled).
	DedupeThrottle DedupeMode = "throttle"
	// DedupeDebounce runs the job once the window has passed; while it has not started, a later
	// enqueue changes it as Replace says and answers it (OutcomeDebounced): the last call wins.
	DedupeDebounce DedupeMode = "debounce"
)

// DedupeReplace is what a debounce changes in the waiting job.
type DedupeReplace string

const (
	// ReplaceBoth replaces the payload and pushes the run time (the default).
	ReplaceBoth DedupeReplace = "both"
	// ReplacePayload replaces the payload and keeps the run time.
	ReplacePayload DedupeReplace = "payload"
	// ReplaceRunAt pushes the run time to now + Window and keeps the payload.
	ReplaceRunAt DedupeReplace = "runAt"
)

// Dedupe is a deduplication window (EnqueueOptions.Dedupe; docs/deduplication.md): enqueues of
// one queue, type, mode and Key share a job, enforced in PostgreSQL across every process. Not
// with an idempotency key.
type Dedupe struct {
	// Key is 1 to 512 characters, stored hashed.
	Key string
	// Window is 100 ms to 30 days, whole milliseconds.
	Window time.Duration
	// Mode is DedupeThrottle or DedupeDebounce.
	Mode DedupeMode
	// Replace is for a debounce only (default ReplaceBoth).
	Replace DedupeReplace

	// raw is the option as decoded from JSON (UnmarshalJSON): sent as it is, so the SQL function
	// checks exactly what was given.
	raw json.RawMessage
}

// UnmarshalJSON reads the option by its wire names (key, windowMs, mode, replace).
func (d *Dedupe) UnmarshalJSON(data []byte) error {
	var wire struct {
		Key      string        `json:"key"`
		WindowMs int64         `json:"windowMs"`
		Mode     DedupeMode    `json:"mode"`
		Replace  DedupeReplace `json:"replace"`
	}
	// (A value of the wrong type is kept as given for the SQL function to name.)
	_ = json.Unmarshal(data, &wire)
	*d = Dedupe{Key: wire.Key, Window: time.Duration(wire.WindowMs) * time.Millisecond, Mode: wire.Mode, Replace: wire.Replace,
		raw: append(json.RawMessage(nil), data...)}
	return nil
}

// EnqueueOutcome is what an enqueue did.
type EnqueueOutcome string

const (
	// OutcomeCreated: a new job was written.
	OutcomeCreated EnqueueOutcome = "created"
	// OutcomeDuplicate: an exact repeat of an idempotent enqueue; its job, nothing written.
	OutcomeDuplicate EnqueueOutcome = "duplicate"
	// OutcomeThrottled: the throttle window's first job; nothing written.
	OutcomeThrottled EnqueueOutcome = "throttled"
	// OutcomeDebounced: the waiting job took this enqueue's payload and/or run time.
	OutcomeDebounced EnqueueOutcome = "debounced"
)

// EnqueueResult is EnqueueDeduped's answer: the job and what the enqueue did.
type EnqueueResult struct {
	JobID   string
	Outcome EnqueueOutcome
}

// EnqueueDeduped enqueues one job with a deduplication window (opts.Dedupe) and answers the job
// and what happened: OutcomeCreated, OutcomeThrottled or OutcomeDebounced. In the Queue's
// transaction (With) like Enqueue: a rollback undoes it, and other enqueues of the key wait for
// that transaction to end. Arguments and errors as Enqueue.
//
//	res, err := queue.EnqueueDeduped(ctx, "search.reindex", Doc{ID: "42"}, &workhorse.EnqueueOptions{
//		Dedupe: &workhorse.Dedupe{Key: "doc-42", Window: 5 * time.Second, Mode: workhorse.DedupeDebounce},
//	})
func (q *Queue) EnqueueDeduped(ctx context.Context, jobType string, payload any, opts *EnqueueOptions) (EnqueueResult, error) {
	var o EnqueueOptions
	if opts != nil {
		o = *opts
	}
	body, err := wireRequest([]byte{'['}, jobType, payload, &o, "")
	if err != nil {
		return EnqueueResult{}, err
	}
	traced := traceSend(ctx)
	traced.add(o.Queue, jobType, len(body))
	var outcomes []EnqueueOutcome
	ids, err := q.sendTo(ctx, traced, append(body, ']'), enqueueManyOutcomesSQL, &outcomes)
	var unknown *UnknownDependencyError
	if errors.As(err, &unknown) {
		unknown.Field = strings.TrimPrefix(unknown.Field, "requests[0].")
		unknown.Message = strings.TrimPrefix(unknown.Message, "requests[0].")
	}
	if err = renamedRequestError(err, func(string) string { return "" }); err != nil {
		return EnqueueResult{}, err
	}
	return EnqueueResult{JobID: ids[0], Outcome: outcomes[0]}, nil
}

// wireDedupe appends the request's "dedupe" option to out (nothing without one).
func wireDedupe(out []byte, d *Dedupe, path string) ([]byte, error) {
	if d == nil {
		return out, nil
	}
	out = append(out, `,"dedupe":`...)
	if d.raw != nil {
		return append(out, d.raw...), nil
	}
	if err := checkText(d.Key, path+"dedupe.key"); err != nil {
		return nil, err
	}
	ms, err := millis(d.Window, path+"dedupe.windowMs")
	if err != nil {
		return nil, err
	}
	wire := map[string]any{"key": d.Key, "windowMs": ms, "mode": d.Mode}
	if d.Replace != "" {
		wire["replace"] = d.Replace
	}
	encoded, _ := json.Marshal(wire)
	return append(out, encoded...), nil
}
