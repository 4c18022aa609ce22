package workhorse

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// HandlerTx is the transaction of a transactional handler ([HandleTx]): the job's completion
// is recorded in it (complete_v1), so the handler's writes commit exactly when the job
// succeeds, and roll back when it fails, is canceled or the worker lost it. On a pgx worker
// Pgx is the transaction (SQL is nil); on a database/sql worker SQL is (Pgx is nil). DB wraps
// either for Queue.With and Admin.With, so jobs the handler enqueues commit with it too.
type HandlerTx struct {
	pgx pgx.Tx
	sql *sql.Tx
}

// Pgx is the transaction on a pgx worker (workhorse.Pgx(*pgxpool.Pool)); nil otherwise.
func (t *HandlerTx) Pgx() pgx.Tx { return t.pgx }

// SQL is the transaction on a database/sql worker (workhorse.SQL(*sql.DB)); nil otherwise.
func (t *HandlerTx) SQL() *sql.Tx { return t.sql }

// DB is the transaction as a DB, for queue.With(tx.DB()).
func (t *HandlerTx) DB() DB {
	if t.pgx != nil {
		return Pgx(t.pgx)
	}
	return SQL(t.sql)
}

func (t *HandlerTx) commit(ctx context.Context) error {
	if t.pgx != nil {
		return t.pgx.Commit(ctx)
	}
	return t.sql.Commit()
}

func (t *HandlerTx) rollback(ctx context.Context) {
	if t.pgx != nil {
		_ = t.pgx.Rollback(ctx)
		return
	}
	_ = t.sql.Rollback()
}

// HandleTx registers a transactional handler of one job type: it runs inside a transaction the
// worker opens on its pool, and the worker records the job's success in that same transaction
// before committing it. Write through tx and your writes and the job's completion commit
// together; an error, a panic, a cancel or a lost lease rolls them back (the failure is then
// recorded on its own, and a retry runs the handler again in a new transaction). The job's
// checkpoints are written in the transaction too; progress, sleeps and waits commit on their
// own. The handler holds one of the pool's connections while it runs.
//
//	err := workhorse.HandleTx(worker, "invoice.book", func(ctx context.Context, job *workhorse.Job, tx *workhorse.HandlerTx, inv Invoice) (any, error) {
//		_, err := tx.Pgx().Exec(ctx, "INSERT INTO ledger (invoice, amount) VALUES ($1, $2)", inv.ID, inv.Amount)
//		return nil, err
//	})
func HandleTx[P, R any](w *Worker, jobType string, fn func(ctx context.Context, job *Job, tx *HandlerTx, payload P) (R, error), opts ...HandlerOptions) error {
	if fn == nil {
		return invalid("handler", "must be a function")
	}
	erased := func(ctx context.Context, job *Job, raw []byte) ([]byte, error) {
		payload, err := decodePayload[P](job, raw)
		if err != nil {
			return nil, err
		}
		result, err := fn(ctx, job, job.tx, payload)
		if err != nil {
			return nil, err
		}
		return toJSON(result, "result", maxJSONBytes)
	}
	return w.register(jobType, &handler{fn: erased, transactional: true}, opts)
}

// decodePayload decodes a job's payload into P. A payload that does not decode fails the job
// at once ([NonRetryable]: every attempt would fail the same way), with the details.
func decodePayload[P any](job *Job, raw []byte) (P, error) {
	var payload P
	if err := json.Unmarshal(raw, &payload); err != nil {
		return payload, NonRetryable(WrapError("PayloadDecodeError", fmt.Errorf("the payload of job %s does not decode into %T: %w", job.ID, payload, err)))
	}
	return payload, nil
}

// executeInTx runs a transactional handler and records its ending: the success inside the
// handler's transaction, anything else after a rollback, as execute records a failure.
func (w *Worker) executeInTx(r *run, h *handler, payload []byte) error {
	job := r.job
	background := context.WithoutCancel(r.ctx)
	tx, err := w.pool.begin(background)
	if err != nil {
		return w.settleFailure(r, err)
	}
	job.tx = tx
	result, err := invoke(h, r, payload)
	if err == nil && r.gaveUp() {
		err = context.Cause(r.ctx)
	}
	if err != nil {
		tx.rollback(background)
		return w.settleFailure(r, err)
	}
	var s string
	err = queryRow(background, tx.DB(), completeSQL, []any{job.ID, job.WorkerID, job.FenceToken, string(result)}, &s)
	if err == nil && s == "succeeded" {
		err = fromDriverError(tx.commit(background))
		if err == nil {
			w.reportStatus(r, s, nil)
			return nil
		}
	}
	// Failed, stale or canceled meanwhile: none of the handler's writes may stay.
	tx.rollback(background)
	switch {
	case err != nil:
		return w.settleFailure(r, err)
	case s == "canceled":
		// The rollback undid the cancel complete_v1 recorded: fail_v1 records it again.
		return w.settleFailure(r, &JobCanceledError{JobID: job.ID})
	default:
		w.reportStatus(r, s, nil)
		return nil
	}
}
