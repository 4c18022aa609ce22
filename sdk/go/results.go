package workhorse

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// JobFailedError is what Queue.WaitForResult returns for a job that ended `failed` (its attempts
// ran out, it failed for good, or its deadline passed): Err is the job's stored error envelope.
type JobFailedError struct {
	JobID string
	Err   ErrorEnvelope
}

func (e *JobFailedError) Error() string {
	return "job " + e.JobID + " failed: " + e.Err.Name + ": " + e.Err.Message
}

// JobResultCanceledError is what Queue.WaitForResult returns for a job that ended `canceled`:
// Err is its stored envelope (name "Canceled", the reason as the message). errors.As finds a
// *JobCanceledError in it too.
type JobResultCanceledError struct {
	JobID string
	Err   ErrorEnvelope
}

func (e *JobResultCanceledError) Error() string {
	return "job " + e.JobID + " was canceled: " + e.Err.Message
}

func (e *JobResultCanceledError) Unwrap() error { return &JobCanceledError{JobID: e.JobID} }

// JobNotFoundError is what Queue.WaitForResult returns for an id this producer cannot read: no
// such job, one another login role enqueued (nothing is revealed about it), or one retention
// deleted.
type JobNotFoundError struct{ JobID string }

func (e *JobNotFoundError) Error() string {
	return "job " + e.JobID + " was not found (or was enqueued by another login role)"
}

// WaitForResultTimeoutError is what Queue.WaitForResult returns when ctx's deadline passed
// before the job ended; the job keeps running. It wraps context.DeadlineExceeded.
type WaitForResultTimeoutError struct {
	JobID string
	Err   error
}

func (e *WaitForResultTimeoutError) Error() string {
	return "job " + e.JobID + " did not end before the deadline; it keeps running"
}

func (e *WaitForResultTimeoutError) Unwrap() error { return e.Err }

// resultPoll is how often a waiter reads again without a notification (results.pollMs).
var resultPoll = time.Duration(*limits.Results.PollMs.Default) * time.Millisecond

// resultTTLSeconds is how long a registration lives: a few polls, each of which renews it.
var resultTTLSeconds = min(limits.Results.TTLSeconds.Max, max(*limits.Results.TTLSeconds.Default, 3*int64(resultPoll/time.Second)))

// WaitForResult waits until the job ends, whichever process or language runs it, and returns
// its result (JSON as stored; "null" for none). A job that ended `failed` returns a
// *JobFailedError, one that ended `canceled` a *JobResultCanceledError, an id this producer
// cannot read a *JobNotFoundError. When ctx's deadline passes it returns a
// *WaitForResultTimeoutError, when ctx is canceled ctx.Err(); the job goes on either way. A job
// that has ended answers at once. Woken by the notification of the job's end (a LISTEN on a
// connection of its own, when the Queue runs on a pool), it reads again every 5 s as well
// (results.pollMs), so a lost notification only delays it.
//
//	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
//	defer cancel()
//	result, err := queue.WaitForResult(ctx, jobID)
func (q *Queue) WaitForResult(ctx context.Context, jobID string) (json.RawMessage, error) {
	if err := checkJobID(jobID, "jobId"); err != nil {
		return nil, err
	}
	if err := q.schema.check(ctx, q.db); err != nil {
		return nil, err
	}
	var result json.RawMessage
	done := false
	if pool := q.db.asPool(); pool != nil {
		err := pool.listen(ctx, func(conn *pgx.Conn) error {
			if _, err := conn.Exec(ctx, listenResultsSQL); err != nil {
				return err
			}
			for {
				var err error
				if result, done, err = readResult(ctx, pgxDB{q: conn}, jobID); err != nil || done {
					return err
				}
				if err := awaitNotification(ctx, conn, jobID); err != nil {
					return err
				}
			}
		})
		if done {
			return result, err
		}
		if ctx.Err() != nil {
			return nil, waitError(ctx, jobID, ctx.Err())
		}
		// No listener (a database/sql driver without LISTEN, or a broken connection): polling,
		// which returns an error that waiting does not pass.
	}
	for {
		var err error
		if result, done, err = readResult(ctx, q.db, jobID); done {
			return result, err
		} else if err != nil {
			return nil, waitError(ctx, jobID, err)
		}
		select {
		case <-ctx.Done():
			return nil, waitError(ctx, jobID, ctx.Err())
		case <-time.After(resultPoll):
		}
	}
}

// awaitNotification returns once a notification names jobID or the poll interval passed.
func awaitNotification(ctx context.Context, conn *pgx.Conn, jobID string) error {
	poll, cancel := context.WithTimeout(ctx, resultPoll)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(poll)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if poll.Err() != nil {
				return nil
			}
			return err
		}
		if n.Channel == resultsChannel && containsID(n.Payload, jobID) {
			return nil
		}
	}
}

func containsID(payload, jobID string) bool {
	for _, id := range strings.Split(payload, ",") {
		if strings.EqualFold(id, jobID) {
			return true
		}
	}
	return false
}

// readResult reads the job once: its result and true once it ended (or an error for a failed,
// canceled or unknown one), false while it runs.
func readResult(ctx context.Context, db DB, jobID string) (json.RawMessage, bool, error) {
	var state string
	var result, envelope *string
	if err := queryRow(ctx, db, awaitResultSQL, []any{jobID, resultTTLSeconds}, &state, &result, &envelope); err != nil {
		return nil, false, err
	}
	var e ErrorEnvelope
	if envelope != nil {
		if err := json.Unmarshal([]byte(*envelope), &e); err != nil {
			return nil, true, err
		}
	}
	switch state {
	case "live":
		return nil, false, nil
	case "succeeded":
		if result == nil {
			return json.RawMessage("null"), true, nil
		}
		return json.RawMessage(*result), true, nil
	case "failed":
		return nil, true, &JobFailedError{JobID: jobID, Err: e}
	case "canceled":
		return nil, true, &JobResultCanceledError{JobID: jobID, Err: e}
	default:
		return nil, true, &JobNotFoundError{JobID: jobID}
	}
}

// waitError is err, or, when ctx ended meanwhile, what ends the wait: a
// *WaitForResultTimeoutError past the deadline, else ctx.Err().
func waitError(ctx context.Context, jobID string, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &WaitForResultTimeoutError{JobID: jobID, Err: ctx.Err()}
	}
	return ctx.Err()
}
