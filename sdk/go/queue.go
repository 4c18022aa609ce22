package workhorse

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// EnqueueOptions are the options of one job; the zero value of each field is its default.
type EnqueueOptions struct {
	// Queue is the queue's name (default "default"): letters, digits and . _ : / -, at most 128.
	Queue string
	// Priority is 0 to 100, higher first; strict, and FIFO within one priority (default 0).
	Priority int
	// RunAt: not before this time (default now; a past time means now).
	RunAt time.Time
	// MaxAttempts before the job fails for good, 1 to 100 (default 25).
	MaxAttempts int
	// RetryPolicy is the backoff between attempts (default: the handler's, else exponential).
	RetryPolicy *RetryPolicy
	// Tags are labels for operators: at most 20 strings of 1 to 64 characters.
	Tags []string
	// Deadline: the whole job must end by then, or it fails with DeadlineExceeded, never retried.
	Deadline time.Time
	// ExecutionTimeout bounds each attempt, 1 s to 24 h (whole milliseconds): then the handler's
	// context is canceled with an ExecutionTimeoutError and the attempt closes as `timeout`.
	ExecutionTimeout time.Duration
	// IdempotencyKey makes the enqueue idempotent: while the key lives, an exact repeat returns
	// the existing job's id and writes nothing; a different request with the same key fails with
	// IdempotencyConflictError. 1 to 512 characters, stored hashed.
	IdempotencyKey string
	// IdempotencyScope is where the key is unique (default: the job's queue).
	IdempotencyScope string
	// IdempotencyTTL is how long the key is remembered, 1 s to 30 days (default 24 h).
	IdempotencyTTL time.Duration
	// DependsOn: the job starts `blocked` and runs once every prerequisite has ended (1 to 1000
	// distinct jobs; see docs/orchestration.md). A prerequisite that names no job is refused
	// with an *UnknownDependencyError.
	DependsOn []Prerequisite
	// OnDependencyFailed: what the job does when a prerequisite failed (default DependencyFail).
	OnDependencyFailed DependencyPolicy
	// OnDependencyCanceled: what the job does when a prerequisite was canceled (default DependencyCancel).
	OnDependencyCanceled DependencyPolicy
	// Dedupe is a deduplication window, throttle or debounce (see Dedupe; EnqueueDeduped says
	// which happened).
	Dedupe *Dedupe
	// ConcurrencyKey is the job's key (a tenant, a customer; 1 to 256 characters): in a queue
	// whose policy has PerKey, at most PerKey.Concurrency jobs of one key are active at once,
	// across all workers (see SetQueuePolicy). Stored with the job; never changes.
	ConcurrencyKey string

	// notes of options decoded from JSON (see UnmarshalJSON); nil for options built in Go.
	notes *wireNotes
}

// EnqueueRequest is one job of a batch given to EnqueueMany.
type EnqueueRequest struct {
	Type string
	// Payload is encoded with encoding/json (a json.RawMessage goes as it is): JSON of at most 1 MiB.
	Payload any
	EnqueueOptions
}

// Queue puts jobs into PostgreSQL. Through a pool each call commits on its own; through your
// transaction (queue.With(workhorse.Pgx(tx))) the job commits or rolls back with your writes.
//
//	queue := workhorse.NewQueue(workhorse.Pgx(pool))
//	tx, _ := pool.Begin(ctx)
//	_, _ = tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", orderID)
//	jobID, err := queue.With(workhorse.Pgx(tx)).Enqueue(ctx, "order.fulfill", Order{ID: orderID}, nil)
//	_ = tx.Commit(ctx)
type Queue struct {
	db     DB
	schema *schemaGate
}

// NewQueue returns a Queue that runs its calls on db.
func NewQueue(db DB) *Queue {
	return &Queue{db: db, schema: &schemaGate{}}
}

// With returns a Queue whose calls run on db instead, typically your open transaction.
func (q *Queue) With(db DB) *Queue {
	return &Queue{db: db, schema: q.schema}
}

// Enqueue validates and enqueues one job and returns its id. A bad argument returns a
// *ValidationError naming the field, and nothing is written.
func (q *Queue) Enqueue(ctx context.Context, jobType string, payload any, opts *EnqueueOptions) (string, error) {
	var o EnqueueOptions
	if opts != nil {
		o = *opts
	}
	body, err := wireRequest([]byte{'['}, jobType, payload, &o, "")
	if err != nil {
		return "", err
	}
	traced := traceSend(ctx)
	traced.add(o.Queue, jobType, len(body))
	ids, err := q.send(ctx, traced, append(body, ']'))
	var unknown *UnknownDependencyError
	if errors.As(err, &unknown) {
		// Named as the caller gave it: `dependsOn[0]`, not the batch's `requests[0].dependsOn[0]`.
		unknown.Field = strings.TrimPrefix(unknown.Field, "requests[0].")
		unknown.Message = strings.TrimPrefix(unknown.Message, "requests[0].")
	}
	err = renamedRequestError(err, func(string) string { return "" })
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// EnqueueMany enqueues up to 1000 jobs in one statement, all or nothing, and returns their ids
// in input order.
func (q *Queue) EnqueueMany(ctx context.Context, requests []EnqueueRequest) ([]string, error) {
	if len(requests) == 0 {
		return []string{}, nil
	}
	body := make([]byte, 0, 64*len(requests))
	body = append(body, '[')
	traced := traceSend(ctx)
	for i := range requests {
		if i > 0 {
			body = append(body, ',')
		}
		var err error
		r := &requests[i]
		if body, err = wireRequest(body, r.Type, r.Payload, &r.EnqueueOptions, "requests["+strconv.Itoa(i)+"]."); err != nil {
			return nil, err
		}
		traced.add(r.Queue, r.Type, len(body))
	}
	return q.send(ctx, traced, append(body, ']'))
}

// send runs one enqueue statement; a traced one in a PRODUCER span whose trace context each
// job stores (docs/operations.md#tracing).
func (q *Queue) send(ctx context.Context, traced *tracedSend, requests []byte) ([]string, error) {
	return q.sendTo(ctx, traced, requests, enqueueManySQL, nil)
}

// sendTo is send through `statement`; with outcomes non-nil (enqueueManyOutcomesSQL) it also
// reads each request's outcome.
func (q *Queue) sendTo(ctx context.Context, traced *tracedSend, requests []byte, statement string, outcomes *[]EnqueueOutcome) ([]string, error) {
	if err := q.schema.check(ctx, q.db); err != nil {
		return nil, err
	}
	var span trace.Span
	if traced != nil {
		ctx, span, requests = traced.start(ctx, requests)
	}
	ids := make([]string, 0, 1)
	err := queryAll(ctx, q.db, statement, []any{string(requests)}, func(r rows) error {
		var id string
		if outcomes == nil {
			err := r.Scan(&id)
			ids = append(ids, id)
			return err
		}
		var outcome string
		err := r.Scan(&id, &outcome)
		ids = append(ids, id)
		*outcomes = append(*outcomes, EnqueueOutcome(outcome))
		return err
	})
	if span != nil {
		endSend(span, ids, err)
	}
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// wireRequest appends the JSON object enqueue_many_v1 reads for one enqueue call to out. Checked
// here: what JSON cannot carry (invalid UTF-8, NUL), the Go types' own shape (whole milliseconds,
// times between the years 1970 and 9999, options decoded from JSON); every range and rule of
// the request is the SQL function's (a *ValidationError naming the field, nothing written).
// `path` prefixes field names for batch members ("requests[3].").
func wireRequest(out []byte, jobType string, payload any, o *EnqueueOptions, path string) ([]byte, error) {
	if n := o.notes; n != nil {
		if len(n.unknown) > 0 {
			return nil, invalid(path+n.unknown[0], "is not an enqueue option (queue, priority, runAt, maxAttempts, retryPolicy, tags, deadline, executionTimeoutMs, idempotencyKey, idempotencyScope, idempotencyTtlMs, dependsOn, onDependencyFailed, onDependencyCanceled, dedupe)")
		}
		if n.problem != nil {
			return nil, invalid(path+n.problem.Field, "%s", n.problem.Message)
		}
	}
	data, err := toJSON(payload, path+"payload", maxJSONBytes)
	if err != nil {
		return nil, err
	}
	text := func(field, value string) error {
		if err := checkText(value, path+field); err != nil {
			return err
		}
		encoded, _ := json.Marshal(value)
		out = append(append(append(append(out, `,"`...), field...), `":`...), encoded...)
		return nil
	}
	number := func(field string, value int64) {
		out = strconv.AppendInt(append(append(append(out, `,"`...), field...), `":`...), value, 10)
	}
	duration := func(field string, d time.Duration) error {
		ms, err := millis(d, path+field)
		number(field, ms)
		return err
	}
	if err := checkText(jobType, path+"type"); err != nil {
		return nil, err
	}
	encodedType, _ := json.Marshal(jobType)
	out = append(append(append(append(out, `{"type":`...), encodedType...), `,"payload":`...), data...)
	if o.Queue != "" || o.isGiven("queue") {
		if err := text("queue", o.Queue); err != nil {
			return nil, err
		}
	}
	if o.Priority != 0 || o.isGiven("priority") {
		number("priority", int64(o.Priority))
	}
	if o.MaxAttempts != 0 || o.isGiven("maxAttempts") {
		number("maxAttempts", int64(o.MaxAttempts))
	}
	for _, t := range []struct {
		at    time.Time
		field string
	}{{o.RunAt, "runAt"}, {o.Deadline, "deadline"}} {
		if t.at.IsZero() && !o.isGiven(t.field) {
			continue
		}
		stamp, err := checkTime(t.at, path+t.field)
		if err != nil {
			return nil, err
		}
		out = append(append(append(append(out, `,"`...), t.field...), `":"`...), stamp...)
		out = append(out, '"')
	}
	if o.ExecutionTimeout != 0 || o.isGiven("executionTimeoutMs") {
		if err := duration("executionTimeoutMs", o.ExecutionTimeout); err != nil {
			return nil, err
		}
	}
	if o.RetryPolicy != nil {
		policy, err := o.RetryPolicy.wire(path + "retryPolicy")
		if err != nil {
			return nil, err
		}
		out = append(append(out, `,"retryPolicy":`...), policy...)
	}
	if o.Tags != nil {
		for i, tag := range o.Tags {
			if err := checkText(tag, path+"tags["+strconv.Itoa(i)+"]"); err != nil {
				return nil, err
			}
		}
		tags, _ := json.Marshal(o.Tags)
		out = append(append(out, `,"tags":`...), tags...)
	}
	if out, err = wireDependencies(out, o, path); err != nil {
		return nil, err
	}
	if o.ConcurrencyKey != "" || o.isGiven("concurrencyKey") {
		if err := text("concurrencyKey", o.ConcurrencyKey); err != nil {
			return nil, err
		}
	}
	if o.IdempotencyKey != "" || o.isGiven("idempotencyKey") {
		if err := text("idempotencyKey", o.IdempotencyKey); err != nil {
			return nil, err
		}
	}
	if o.IdempotencyScope != "" || o.isGiven("idempotencyScope") {
		if err := text("idempotencyScope", o.IdempotencyScope); err != nil {
			return nil, err
		}
	}
	if o.IdempotencyTTL != 0 || o.isGiven("idempotencyTtlMs") {
		if err := duration("idempotencyTtlMs", o.IdempotencyTTL); err != nil {
			return nil, err
		}
	}
	if out, err = wireDedupe(out, o.Dedupe, path); err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// renamedRequestError gives a *ValidationError of enqueue_many_v1 (which names a request's fields
// "requests[i].") the name the caller gave: prefix("0") is "" for one job ("priority"),
// "children[0]" for a child ("children[0].priority"). The typed kinds built on it pass as they are.
func renamedRequestError(err error, prefix func(index string) string) error {
	v, ok := err.(*ValidationError)
	if !ok || !strings.HasPrefix(v.Field, "requests[") {
		return err
	}
	end := strings.IndexByte(v.Field, ']')
	if end < 0 {
		return err
	}
	head, rest := prefix(v.Field[len("requests["):end]), strings.TrimPrefix(v.Field[end+1:], ".")
	switch {
	case head == "" && rest == "":
		v.Field = "request"
	case head == "":
		v.Field = rest
	case rest == "":
		v.Field = head
	default:
		v.Field = head + "." + rest
	}
	return v
}
