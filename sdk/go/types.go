package workhorse

import (
	"encoding/json"
	"time"
)

// JobState is one of the seven states of a job: the first four are live, the last three terminal.
type JobState string

const (
	StateBlocked   JobState = "blocked"
	StateScheduled JobState = "scheduled"
	StateReady     JobState = "ready"
	StateActive    JobState = "active"
	StateSucceeded JobState = "succeeded"
	StateFailed    JobState = "failed"
	StateCanceled  JobState = "canceled"
)

// JobStates lists every state, live ones first.
var JobStates = []JobState{StateBlocked, StateScheduled, StateReady, StateActive, StateSucceeded, StateFailed, StateCanceled}

// ErrorEnvelope is the stored form of a failed attempt's or job's error, the same in every SDK.
type ErrorEnvelope struct {
	Name    string `json:"name"`
	Message string `json:"message"`
	Stack   string `json:"stack,omitempty"`
}

// JobSnapshot is what Admin.GetJob and Admin.ListJobs report about one job, whichever state it
// is in. JSON values (payload, result, progress, retry policy) are as stored; a nil RawMessage
// is SQL NULL.
type JobSnapshot struct {
	ID       string
	Queue    string
	Type     string
	Payload  json.RawMessage
	Priority int
	State    JobState
	// CurrentAttempt counts the attempts started so far (0 before the first claim).
	CurrentAttempt int
	MaxAttempts    int
	// RetryPolicy is the job's own policy, normalized; nil when none was given.
	RetryPolicy      json.RawMessage
	Tags             []string
	Deadline         *time.Time
	ExecutionTimeout time.Duration
	// RunAt is when the job is (or was last) due to run.
	RunAt      time.Time
	CreatedAt  time.Time
	FinishedAt *time.Time
	// Result is the handler's result, for succeeded jobs.
	Result json.RawMessage
	// Error is the terminal error, or the last attempt's while the job waits for a retry.
	Error *ErrorEnvelope
	// WorkerID is the owning worker while active.
	WorkerID          string
	LeaseExpiresAt    *time.Time
	CancelRequestedAt *time.Time
	// Progress is the last value the handler reported with Job.SetProgress.
	Progress json.RawMessage
	// RedrivenFrom is, for a redriven job, the dead letter it was created from.
	RedrivenFrom string
	// RedrivenTo is, for a dead letter, the jobs redriven from it, oldest first.
	RedrivenTo []string
	// ConcurrencyKey is the key the job was enqueued with (GetJob; "" in listings and for a job
	// without one).
	ConcurrencyKey string
	// JobLineage: the job's prerequisites, parent and children (Admin.GetJob only; zero in lists).
	JobLineage
}

// TimelineEntry is one entry of a job's history: a lifecycle event or a closed attempt.
type TimelineEntry struct {
	ID string
	At time.Time
	// Source is "event" or "attempt".
	Source string
	// Kind is the event kind (enqueued, claimed, succeeded, ...) or the attempt's outcome.
	Kind       string
	Attempt    *int
	WorkerID   string
	FenceToken *int64
	Data       json.RawMessage
	// LoginRole is the login role of the session that wrote an event (PostgreSQL's
	// session_user), next to the caller-chosen actor in Data of a human decision or an operator
	// change; "" for attempts and for events written before the schema recorded it.
	LoginRole string
}

// Page is a page of results and the cursor of the next one ("" on the last page).
type Page[T any] struct {
	Items      []T
	NextCursor string
}

// ListJobsFilter filters Admin.ListJobs; zero fields filter nothing.
type ListJobsFilter struct {
	Queue  string
	Type   string
	States []JobState
	// Limit is 1 to 1000 (default 50).
	Limit  int
	Cursor string
	// ParentID lists that job's children instead, in the order they were started (with the
	// other filters).
	ParentID string
}

// TimelineOptions page through Admin.GetJobTimeline.
type TimelineOptions struct {
	// Limit is 1 to 1000 (default 100).
	Limit  int
	Cursor string
}

// CancelResult is the answer of Admin.Cancel.
type CancelResult string

const (
	Canceled        CancelResult = "canceled"
	CancelRequested CancelResult = "cancel_requested"
	AlreadyTerminal CancelResult = "already_terminal"
	NotFound        CancelResult = "not_found"
)

// DeadLetterFilter selects dead letters (failed jobs); zero fields filter nothing.
type DeadLetterFilter struct {
	Queue string
	Type  string
	// ErrorName is the name of the final error, e.g. "PaymentDeclined".
	ErrorName      string
	FinishedAfter  time.Time
	FinishedBefore time.Time
}

// ListDeadLettersOptions filter and page Admin.ListDeadLetters.
type ListDeadLettersOptions struct {
	DeadLetterFilter
	// Limit is 1 to 1000 (default 50).
	Limit  int
	Cursor string
}

// ActorOptions say who asked for an operator action and why; both are recorded with it.
type ActorOptions struct {
	Actor  string
	Reason string
}

// RedriveOptions: RequestID makes a redrive idempotent (a repeat returns the same new job).
type RedriveOptions struct {
	RequestID string
	ActorOptions
}

// RedriveManyOptions: as RedriveOptions, plus DryRun (list, write nothing) and Limit (1 to 1000, default 1000).
type RedriveManyOptions struct {
	RequestID string
	DryRun    bool
	Limit     int
	ActorOptions
}

// RedriveResult is one dead letter of a RedriveMany call; NewJobID is "" in a dry run.
type RedriveResult struct {
	SourceJobID string
	NewJobID    string
}

// QueueInfo is a queue's pause state and its live jobs.
type QueueInfo struct {
	Queue  string
	Paused bool
	// ChangedAt, ChangedBy and Reason tell when, by whom and why the pause state last changed;
	// LoginRole is the login role (session_user) of the session that changed it ("" for a change
	// made before the schema recorded it).
	ChangedAt *time.Time
	ChangedBy string
	LoginRole string
	Reason    string
	Ready     int
	Scheduled int
	Active    int
	Blocked   int
}
