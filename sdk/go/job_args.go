package workhorse

import (
	"context"
	"encoding/json"
)

// JobArgs is a payload type bound to its job type: Kind returns the job type (called on the
// zero value, so it must not depend on the fields). Enqueue it with [EnqueueArgs] and handle it
// with [HandleArgs], and the payload's type is checked by the compiler at both ends: a handler
// of SendEmail gets a SendEmail, and nothing else can be enqueued under its kind through them.
// The untyped Queue.Enqueue and [Handle] stay for dynamic use.
//
//	type SendEmail struct {
//		To string `json:"to"`
//	}
//
//	func (SendEmail) Kind() string { return "email.send" }
type JobArgs interface {
	Kind() string
}

// EnqueueArgs enqueues args as a job of its kind (args.Kind()), with the options of
// Queue.Enqueue, and returns its id.
//
//	id, err := workhorse.EnqueueArgs(ctx, queue.With(workhorse.Pgx(tx)), SendEmail{To: "a@example.com"}, nil)
func EnqueueArgs[A JobArgs](ctx context.Context, q *Queue, args A, opts *EnqueueOptions) (string, error) {
	return q.Enqueue(ctx, args.Kind(), args, opts)
}

// ArgsRequest is one request of a Queue.EnqueueMany batch for args, of its kind.
func ArgsRequest[A JobArgs](args A, opts *EnqueueOptions) EnqueueRequest {
	r := EnqueueRequest{Type: args.Kind(), Payload: args}
	if opts != nil {
		r.EnqueueOptions = *opts
	}
	return r
}

// HandleArgs registers the handler of A's kind: the payload is decoded into A (a payload that
// does not decode fails the job at once), and the result R stored as the job's result, as
// [Handle] does.
//
//	err := workhorse.HandleArgs(worker, func(ctx context.Context, job *workhorse.Job, email SendEmail) (any, error) {
//		return nil, mailer.Send(ctx, email.To)
//	})
func HandleArgs[A JobArgs, R any](w *Worker, fn func(ctx context.Context, job *Job, args A) (R, error), opts ...HandlerOptions) error {
	var zero A
	return Handle(w, zero.Kind(), fn, opts...)
}

// HandleArgsTx registers a transactional handler ([HandleTx]) of A's kind.
func HandleArgsTx[A JobArgs, R any](w *Worker, fn func(ctx context.Context, job *Job, tx *HandlerTx, args A) (R, error), opts ...HandlerOptions) error {
	var zero A
	return HandleTx(w, zero.Kind(), fn, opts...)
}

// DecodeArgs decodes a snapshot's payload (Admin.GetJob, Queue.GetJob) as A; a job of another
// kind is a *ValidationError naming "type".
func DecodeArgs[A JobArgs](job *JobSnapshot) (A, error) {
	var args A
	if job.Type != args.Kind() {
		return args, invalid("type", "job %s is a %q job, not %q", job.ID, job.Type, args.Kind())
	}
	err := json.Unmarshal(job.Payload, &args)
	return args, err
}
