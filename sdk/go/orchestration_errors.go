package workhorse

import (
	"encoding/json"
	"fmt"
	"time"
)

// SQLSTATEs of the orchestration calls' refusals (docs/orchestration.md).
const (
	SQLStateUnknownDependency  = "P1020"
	SQLStateChildJobConflict   = "P1021"
	SQLStateDecisionNotAllowed = "P1030"
	// SQLStateNotYours is the worker capability's refusal: see NotYoursError.
	SQLStateNotYours = "P1040"
	// SQLStateJobActionRefused is an operator action's refusal of a job's state: see JobActionRefusedError.
	SQLStateJobActionRefused = "P1050"
)

// NotYoursError says the worker capability does not reach what was asked (SQLSTATE P1040): the
// dependencies of a job the caller does not hold under a live lease and fence, or a registry row
// it did not register. Nothing was read or written.
type NotYoursError struct {
	// Field is what was reached for: "jobId" or "workerId".
	Field   string
	Message string
}

func (e *NotYoursError) Error() string { return e.Field + ": " + e.Message }

// UnknownDependencyError says a DependsOn entry names no job the enqueueing transaction can see
// (SQLSTATE P1020). The whole batch is refused. It is a ValidationError too (errors.As finds both).
type UnknownDependencyError struct {
	ValidationError
	// JobID is the id that names no job.
	JobID string
}

func (e *UnknownDependencyError) Unwrap() error { return &e.ValidationError }

// ChildJobConflictError says RunChild or RunChildren was called under a key that an earlier run
// of the handler used for other child jobs (SQLSTATE P1021): a handler must ask for the same
// children under the same key on every run. It is a ValidationError too.
type ChildJobConflictError struct {
	ValidationError
	// ChildIDs are the children the key already stands for.
	ChildIDs []string
}

func (e *ChildJobConflictError) Unwrap() error { return &e.ValidationError }

// DecisionNotAllowedError says a decision given to Queue.CompleteHumanWait is not one of the
// wait's choices (SQLSTATE P1030); nothing was written. It is a ValidationError too.
type DecisionNotAllowedError struct {
	ValidationError
	// Choices are the decisions the wait allows.
	Choices []string
}

func (e *DecisionNotAllowedError) Unwrap() error { return &e.ValidationError }

// orchestrationError maps the orchestration SQLSTATEs to their typed errors; nil for any other code.
func orchestrationError(code, field, message, detail string) error {
	base := ValidationError{Field: field, Message: message}
	switch code {
	case SQLStateNotYours:
		return &NotYoursError{Field: field, Message: message}
	case SQLStateJobActionRefused:
		var d struct {
			JobID  string `json:"jobId"`
			Action string `json:"action"`
			State  string `json:"state"`
		}
		_ = json.Unmarshal([]byte(detail), &d)
		return &JobActionRefusedError{JobID: d.JobID, Action: d.Action, State: d.State, Message: message}
	case SQLStateUnknownDependency:
		var d struct {
			JobID string `json:"jobId"`
		}
		_ = json.Unmarshal([]byte(detail), &d)
		return &UnknownDependencyError{ValidationError: base, JobID: d.JobID}
	case SQLStateChildJobConflict:
		var d struct {
			ChildIDs []string `json:"childIds"`
		}
		_ = json.Unmarshal([]byte(detail), &d)
		return &ChildJobConflictError{ValidationError: base, ChildIDs: d.ChildIDs}
	case SQLStateDecisionNotAllowed:
		var d struct {
			Choices []string `json:"choices"`
		}
		_ = json.Unmarshal([]byte(detail), &d)
		return &DecisionNotAllowedError{ValidationError: base, Choices: d.Choices}
	}
	return nil
}

// JobBlockedError is returned by RunChild, RunChildren, WaitForSignal and WaitForHuman when the
// job parked: return it from the handler. The worker has let go of the job (its slot is free,
// the attempt stays open), and the handler runs again from the top when what it waits for has
// happened (completed checkpoints replay, and the call then returns its answer).
type JobBlockedError struct {
	JobID string
	// WaitingFor is "children", "signal" or "human".
	WaitingFor string
	// Name is the wait's name, or the children's key.
	Name string
	// TimeoutAt is when a wait with a timeout ends (the job is `scheduled` until then); zero otherwise.
	TimeoutAt time.Time
}

func (e *JobBlockedError) Error() string {
	what := map[string]string{"children": "its children under key", "signal": "signal", "human": "a human decision on"}[e.WaitingFor]
	return fmt.Sprintf("job %s waits for %s %q; the handler runs again then", e.JobID, what, e.Name)
}

// ChildJobFailedError is returned by RunChild when the child ended `failed` or `canceled`. A
// handler may handle it (and, say, compensate) or return it to fail the attempt.
type ChildJobFailedError struct {
	ChildID string
	// ChildState is StateFailed or StateCanceled.
	ChildState JobState
	// ChildError is the child's terminal error envelope.
	ChildError ErrorEnvelope
}

func (e *ChildJobFailedError) Error() string {
	return fmt.Sprintf("child job %s ended %s: %s: %s", e.ChildID, e.ChildState, e.ChildError.Name, e.ChildError.Message)
}

// SignalTimeoutError is returned by WaitForSignal when its timeout passed before a signal of
// that name arrived. The handler may handle it and go on (the wait stays timed out on every
// replay).
type SignalTimeoutError struct {
	JobID      string
	SignalName string
	TimeoutAt  time.Time
}

func (e *SignalTimeoutError) Error() string {
	return fmt.Sprintf("job %s: no signal %q arrived by %s", e.JobID, e.SignalName, e.TimeoutAt.UTC().Format(time.RFC3339Nano))
}

// HumanWaitTimeoutError is returned by WaitForHuman when its timeout passed before anyone
// decided. The handler may handle it and go on.
type HumanWaitTimeoutError struct {
	JobID     string
	WaitName  string
	TimeoutAt time.Time
}

func (e *HumanWaitTimeoutError) Error() string {
	return fmt.Sprintf("job %s: no decision on %q by %s", e.JobID, e.WaitName, e.TimeoutAt.UTC().Format(time.RFC3339Nano))
}

// Names under which these errors are stored when a handler returns them, the TypeScript
// client's class names.
func (e *UnknownDependencyError) ErrorName() string  { return "UnknownDependencyError" }
func (e *ChildJobConflictError) ErrorName() string   { return "ChildJobConflictError" }
func (e *DecisionNotAllowedError) ErrorName() string { return "DecisionNotAllowedError" }
func (e *ChildJobFailedError) ErrorName() string     { return "ChildJobFailedError" }
func (e *SignalTimeoutError) ErrorName() string      { return "SignalTimeoutError" }
func (e *HumanWaitTimeoutError) ErrorName() string   { return "HumanWaitTimeoutError" }
