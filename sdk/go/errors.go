package workhorse

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATEs of the protocol's own refusals (the P1xxx range; docs/protocol.md).
const (
	SQLStateValidation          = "P1001"
	SQLStateBatchTooLarge       = "P1003"
	SQLStateIsolation           = "P1004"
	SQLStateIdempotencyConflict = "P1005"
)

// ValidationError is input that breaks a rule (shape, range, size, JSON-ness). It is returned
// before anything is written: by this SDK for what JSON cannot carry and its own API shape, by
// the SQL functions for every range and rule (SQLSTATE P1001 and P1003).
//
//	var invalid *workhorse.ValidationError
//	if errors.As(err, &invalid) {
//		log.Print(invalid.Field) // "priority", "requests[2].type", ...
//	}
type ValidationError struct {
	// Field is the offending field by its wire name, with a path for batch members
	// ("requests[3].priority") and nested values ("retryPolicy.maxMs").
	Field   string
	Message string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// IdempotencyConflictError says an idempotency key was reused, while it lives, for a request
// that differs from the first one (SQLSTATE P1005). The whole batch, and the caller's
// transaction, is rolled back. It is a ValidationError too (errors.As finds both).
type IdempotencyConflictError struct {
	ValidationError
	// ExistingJobID is the job the key already stands for.
	ExistingJobID string
	// Fields are the request fields that differ, e.g. ["payload", "priority"].
	Fields []string
}

func (e *IdempotencyConflictError) Unwrap() error { return &e.ValidationError }

// IsolationError says a claim ran above READ COMMITTED, where SKIP LOCKED is not safe (P1004).
type IsolationError struct{ Message string }

func (e *IsolationError) Error() string { return e.Message }

// ProtocolError is any other refusal in the protocol's P1xxx range, from a schema newer than
// this SDK's typed errors.
type ProtocolError struct {
	Code    string
	Field   string
	Message string
}

func (e *ProtocolError) Error() string { return e.Code + ": " + e.Message }

// fromDriverError turns an error a workhorse.* SQL function raised into our typed error;
// anything else is returned unchanged.
func fromDriverError(err error) error {
	if err == nil {
		return nil
	}
	var coded interface{ SQLState() string }
	if !errors.As(err, &coded) || !strings.HasPrefix(coded.SQLState(), "P1") {
		return err
	}
	code, message, field, detail := coded.SQLState(), err.Error(), "", ""
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		message, field, detail = pgErr.Message, pgErr.ColumnName, pgErr.Detail
	}
	if field == "" {
		// Other drivers may not expose the COLUMN field; the message starts with it.
		if i := strings.Index(message, ": "); i > 0 && !strings.Contains(message[:i], " ") {
			field = message[:i]
		} else {
			field = "request"
		}
	}
	message = strings.TrimPrefix(message, field+": ")
	switch code {
	case SQLStateValidation, SQLStateBatchTooLarge:
		return &ValidationError{Field: field, Message: message}
	case SQLStateIdempotencyConflict:
		var d struct {
			ExistingJobID string   `json:"existingJobId"`
			Fields        []string `json:"fields"`
		}
		_ = json.Unmarshal([]byte(detail), &d)
		return &IdempotencyConflictError{ValidationError: ValidationError{Field: field, Message: message}, ExistingJobID: d.ExistingJobID, Fields: d.Fields}
	case SQLStateIsolation:
		return &IsolationError{Message: message}
	}
	if typed := orchestrationError(code, field, message, detail); typed != nil {
		return typed
	}
	return &ProtocolError{Code: code, Field: field, Message: message}
}

// SchemaNotInstalledError says the database holds no workhorse schema.
type SchemaNotInstalledError struct{ Expected int }

func (e *SchemaNotInstalledError) Error() string {
	return fmt.Sprintf("the workhorse schema is not installed in this database (this SDK needs version %d); "+
		"call workhorse.InstallSchema(ctx, pool) (or run `npx workhorse schema migrate` or "+
		"`python -m workhorse schema migrate`) once, then start again", e.Expected)
}

// SchemaVersionMismatchError says the database holds a schema version this SDK cannot work
// with: newer than the SDK and no longer serving this release (workhorse.oldest_client_v1()
// above Expected; InstallSchema never downgrades), or older than the oldest version its calls still exist in (InstallSchema
// migrates it). Nothing is changed.
type SchemaVersionMismatchError struct{ Installed, Expected, Minimum int }

func (e *SchemaVersionMismatchError) Error() string {
	if e.Installed > e.Expected {
		return fmt.Sprintf("the workhorse schema in this database is version %d, newer than this package (version %d), "+
			"and it no longer serves this release: upgrade the package to a release that works with it. A schema is never downgraded.",
			e.Installed, e.Expected)
	}
	minimum := e.Minimum
	if minimum == 0 {
		minimum = e.Expected
	}
	return fmt.Sprintf("the workhorse schema in this database is version %d, older than this package needs (version %d to %d): "+
		"call workhorse.InstallSchema(ctx, pool) (or run `npx workhorse schema migrate` or `python -m workhorse schema migrate`) "+
		"as the schema's owner, then start again. Queued jobs, schedules and history are kept.", e.Installed, minimum, e.Expected)
}

// SchemaMigrationError says an upgrade of the schema could not be made: the database is older
// than the first version that can be migrated, the module lacks a step, the role may not
// migrate, or a step failed (Err, the driver's error). Version is the step it stopped at (0
// when none ran); the message says what was kept and what to do.
type SchemaMigrationError struct {
	Reason  string
	Version int
	Err     error
}

func (e *SchemaMigrationError) Error() string { return e.Reason }

func (e *SchemaMigrationError) Unwrap() error { return e.Err }

// JobCanceledError is the cause of a handler's context when an operator canceled the job.
type JobCanceledError struct{ JobID string }

func (e *JobCanceledError) Error() string {
	return "job " + e.JobID + " was canceled; stop work and return"
}

// LeaseLostError is the cause of a handler's context when this worker lost the job's lease
// (heartbeats failed for longer than the lease, or another worker took the job over). Nothing
// the handler does after it is recorded.
type LeaseLostError struct{ JobID string }

func (e *LeaseLostError) Error() string {
	return "job " + e.JobID + ": this worker lost the lease; another worker may run the job"
}

// WorkerShutdownError is the cause of a handler's context when the worker stopped before the
// handler finished. Nothing is recorded: the lease expires and another worker runs the job.
type WorkerShutdownError struct{ JobID string }

func (e *WorkerShutdownError) Error() string {
	return "job " + e.JobID + ": the worker is shutting down; the job will run again elsewhere"
}

// ExecutionTimeoutError is the cause of a handler's context when the attempt ran past the
// job's execution timeout. The attempt is closed as `timeout` and the retry policy applies.
type ExecutionTimeoutError struct {
	JobID   string
	Timeout time.Duration
}

func (e *ExecutionTimeoutError) Error() string {
	return fmt.Sprintf("job %s: the attempt ran longer than its execution timeout of %d ms", e.JobID, e.Timeout.Milliseconds())
}

// JobSleepingError is returned by Job.Sleep when the job went to sleep: return it from the
// handler. The worker has let go of the job, whose handler runs again from the top when it
// wakes (completed checkpoints replay).
type JobSleepingError struct {
	JobID  string
	WakeAt time.Time
}

func (e *JobSleepingError) Error() string {
	return "job " + e.JobID + " sleeps until " + e.WakeAt.UTC().Format(time.RFC3339Nano) + "; the handler runs again then"
}

// WorkerStateError says a worker was used the wrong way (run twice, a type registered twice).
type WorkerStateError struct{ Message string }

func (e *WorkerStateError) Error() string { return e.Message }

// NonRetryable marks a handler's error as final: the job fails at once, whatever attempts
// remain. The stored error is err's (its name and message).
//
//	if account == nil {
//		return nil, workhorse.NonRetryable(fmt.Errorf("account %s does not exist", id))
//	}
func NonRetryable(err error) error {
	return &NonRetryableError{Err: err}
}

// NonRetryableError wraps a handler's error that must not be retried; see [NonRetryable].
type NonRetryableError struct{ Err error }

func (e *NonRetryableError) Error() string { return e.Err.Error() }
func (e *NonRetryableError) Unwrap() error { return e.Err }

// RetryAfter asks for the next attempt after delay instead of the retry policy's delay (a rate
// limit's Retry-After, for instance). Whole milliseconds, at most 7 days.
func RetryAfter(err error, delay time.Duration) error {
	return &RetryAfterError{Err: err, Delay: delay}
}

// RetryAfterError wraps a handler's error with the delay before the next attempt; see [RetryAfter].
type RetryAfterError struct {
	Err   error
	Delay time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// ErrorName methods: the name an error is stored under when a handler returns it (the
// envelope's name), the same as the TypeScript client's class names.
func (e *ValidationError) ErrorName() string          { return "WorkhorseValidationError" }
func (e *IdempotencyConflictError) ErrorName() string { return "IdempotencyConflictError" }
func (e *JobCanceledError) ErrorName() string         { return "JobCanceledError" }
func (e *LeaseLostError) ErrorName() string           { return "LeaseLostError" }
func (e *WorkerShutdownError) ErrorName() string      { return "WorkerShutdownError" }
func (e *ExecutionTimeoutError) ErrorName() string    { return "ExecutionTimeoutError" }
