package workhorse

import "time"

// EventName names what a worker reports through WorkerOptions.OnEvent; the names are the
// TypeScript worker's.
type EventName string

const (
	EventWorkerStarted     EventName = "worker.started"
	EventJobClaimed        EventName = "job.claimed"
	EventJobSucceeded      EventName = "job.succeeded"
	EventJobRetryScheduled EventName = "job.retry_scheduled"
	EventJobFailed         EventName = "job.failed"
	EventJobCanceled       EventName = "job.canceled"
	EventJobLeaseLost      EventName = "job.lease_lost"
	EventJobReleased       EventName = "job.released"
	EventJobSleeping       EventName = "job.sleeping"
	EventJobBlocked        EventName = "job.blocked"
	EventJobAbandoned      EventName = "job.abandoned"
	EventWorkerDraining    EventName = "worker.draining"
	EventWorkerError       EventName = "worker.error"
	EventWorkerStopped     EventName = "worker.stopped"
)

// Event is one thing a worker reports. Fields that do not apply to an event are zero.
type Event struct {
	Name     EventName
	WorkerID string
	// The job's fields, for job.* events.
	JobID   string
	Type    string
	Queue   string
	Attempt int
	// Duration is how long the job ran here, for events of a job that is over for this worker.
	Duration time.Duration
	// Envelope is the stored error, for job.failed and job.retry_scheduled.
	Envelope *ErrorEnvelope
	// RunAt and Delay tell when the next attempt runs, for job.retry_scheduled.
	RunAt time.Time
	Delay time.Duration
	// WakeAt is when a sleeping job wakes, for job.sleeping.
	WakeAt time.Time
	// WaitingFor is what a blocked job waits for ("children", "signal" or "human"), for job.blocked.
	WaitingFor string
	// Reason says why a job was released, for job.released.
	Reason string
	// During says what the worker was doing (claim, complete, fail, heartbeat, listen, tick),
	// and Err what went wrong, for worker.error.
	During string
	Err    error
}
