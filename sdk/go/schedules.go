package workhorse

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// SQLStateScheduleNotFound is the refusal of a schedule key its namespace does not have.
const SQLStateScheduleNotFound = "P1010"

// ScheduleNotFoundError: pause, resume, trigger or history of a key its namespace does not have
// (SQLSTATE P1010). It is a ValidationError too (errors.As finds both).
type ScheduleNotFoundError struct{ ValidationError }

func (e *ScheduleNotFoundError) Unwrap() error { return &e.ValidationError }

// ScheduleDefinition is one cron schedule of a namespace (docs/schedules.md). Key, Type and Cron
// are required; the server reads Cron (5 fields, or 6 with seconds first) in Timezone (an IANA
// name, default "UTC") and refuses an invalid one with a *ValidationError naming
// "definitions[i].cron" (or ".timezone"). Zero values take the server's defaults.
type ScheduleDefinition struct {
	Key      string
	Type     string
	Cron     string
	Timezone string
	// Payload of each job (JSON; default {}).
	Payload any
	// Options of each job.
	Options *ScheduleJobOptions
	// CatchUp: "skip" (default), "latest" or "all": what happens to occurrences missed while no worker ran.
	CatchUp string
	// CatchUpLimit: with "all", the most missed occurrences fired, 1 to 1000 (default 100).
	CatchUpLimit int
	// Overlap: "allow" (default), or "skip" while the schedule's previous job is still live.
	Overlap string
	// MissedAfter: an occurrence not fired within this long of its time is missed, 1 s to 24 h (default 1 min).
	MissedAfter time.Duration
}

// ScheduleJobOptions are the enqueue options of a schedule's jobs.
type ScheduleJobOptions struct {
	Queue            string
	Priority         int
	MaxAttempts      int
	RetryPolicy      *RetryPolicy
	Tags             []string
	ExecutionTimeout time.Duration
}

// SyncedSchedule is what SyncSchedules did to one key: "created", "updated", "unchanged",
// "enabled" or "disabled", and the schedule's revision now.
type SyncedSchedule struct {
	Key      string
	Change   string
	Revision int
}

// ScheduleInfo is a schedule as ListSchedules gives it.
type ScheduleInfo struct {
	Namespace string
	Key       string
	// Definition is the normalized definition (type, cron, timezone, payload, options, catchUp,
	// catchUpLimit, overlap, missedAfterMs), as JSON.
	Definition json.RawMessage
	// State is "active", "paused" or "disabled".
	State       string
	Revision    int
	CreatedAt   time.Time
	UpdatedAt   time.Time
	PausedAt    *time.Time
	PausedBy    string
	PauseReason string
	// NextRunAt is the next planned occurrence (nil unless active).
	NextRunAt    *time.Time
	LastRunAt    *time.Time
	LastJobID    string
	LastJobState string
	// PlannedThrough: how far the server has planned its occurrences.
	PlannedThrough time.Time
	LastError      string
	LastErrorAt    *time.Time
}

// ScheduleHistoryEntry is one change of a schedule (a new revision) or a trigger.
type ScheduleHistoryEntry struct {
	Revision int
	At       time.Time
	// Change is "created", "updated", "disabled", "enabled", "paused", "resumed" or "triggered".
	Change string
	// Definition from this revision on (created, updated, enabled), as JSON; nil otherwise.
	Definition json.RawMessage
	Actor      string
	// LoginRole is the login role (session_user) of the session that made the change, next to
	// the caller-chosen Actor ("" for a change made before the schema recorded it).
	LoginRole string
	Reason    string
	// JobID is the job a trigger enqueued.
	JobID string
}

// SyncSchedules makes definitions the desired state of namespace: new keys are created, changed
// ones updated, keys no longer listed disabled (never deleted), in one transaction under the
// namespace's lock (with queue.With(tx), in yours). The server checks every definition before
// anything is written and plans the schedules; any worker's tick fires them.
func (q *Queue) SyncSchedules(ctx context.Context, namespace string, definitions []ScheduleDefinition) ([]SyncedSchedule, error) {
	if err := checkText(namespace, "namespace"); err != nil {
		return nil, err
	}
	wire := make([]map[string]any, len(definitions))
	for i, d := range definitions {
		m, err := d.wire("definitions[" + strconv.Itoa(i) + "].")
		if err != nil {
			return nil, err
		}
		wire[i] = m
	}
	body, err := json.Marshal(wire)
	if err != nil {
		return nil, invalid("definitions", "must be JSON: %v", err)
	}
	if err := q.schema.check(ctx, q.db); err != nil {
		return nil, err
	}
	synced := []SyncedSchedule{}
	err = queryAll(ctx, q.db, syncSchedulesSQL, []any{namespace, string(body)},
		func(r rows) error {
			var s SyncedSchedule
			var revision int64
			err := r.Scan(&s.Key, &s.Change, &revision)
			s.Revision = int(revision)
			synced = append(synced, s)
			return err
		})
	return synced, err
}

// wire is the definition as sync_schedules_v1 reads it; zero values are left out (the server's
// defaults). Only what JSON cannot carry is checked here.
func (d ScheduleDefinition) wire(path string) (map[string]any, error) {
	m := map[string]any{"key": d.Key, "type": d.Type, "cron": d.Cron}
	if d.Timezone != "" {
		m["timezone"] = d.Timezone
	}
	if d.Payload != nil {
		raw, err := json.Marshal(d.Payload)
		if err != nil {
			return nil, invalid(path+"payload", "must be JSON: %v", err)
		}
		m["payload"] = json.RawMessage(raw)
	}
	if o := d.Options; o != nil {
		opts := map[string]any{}
		if o.Queue != "" {
			opts["queue"] = o.Queue
		}
		if o.Priority != 0 {
			opts["priority"] = o.Priority
		}
		if o.MaxAttempts != 0 {
			opts["maxAttempts"] = o.MaxAttempts
		}
		if o.RetryPolicy != nil {
			policy, err := o.RetryPolicy.wire(path + "options.retryPolicy")
			if err != nil {
				return nil, err
			}
			opts["retryPolicy"] = json.RawMessage(policy)
		}
		if o.Tags != nil {
			opts["tags"] = o.Tags
		}
		if o.ExecutionTimeout != 0 {
			opts["executionTimeoutMs"] = o.ExecutionTimeout.Milliseconds()
		}
		m["options"] = opts
	}
	if d.CatchUp != "" {
		m["catchUp"] = d.CatchUp
	}
	if d.CatchUpLimit != 0 {
		m["catchUpLimit"] = d.CatchUpLimit
	}
	if d.Overlap != "" {
		m["overlap"] = d.Overlap
	}
	if d.MissedAfter != 0 {
		m["missedAfterMs"] = d.MissedAfter.Milliseconds()
	}
	return m, nil
}

// ListSchedules lists the schedules of namespace ("" for every namespace), by namespace and key.
func (a *Admin) ListSchedules(ctx context.Context, namespace string) ([]ScheduleInfo, error) {
	if namespace != "" {
		if err := checkText(namespace, "namespace"); err != nil {
			return nil, err
		}
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return nil, err
	}
	list := []ScheduleInfo{}
	err := queryAll(ctx, a.db, listSchedulesSQL, []any{nullable(namespace)},
		func(r rows) error {
			var s ScheduleInfo
			var revision int64
			var by, reason, jobID, jobState, lastError *string
			err := r.Scan(&s.Namespace, &s.Key, &s.Definition, &s.State, &revision, &s.CreatedAt, &s.UpdatedAt, &s.PausedAt, &by,
				&reason, &s.NextRunAt, &s.LastRunAt, &jobID, &jobState, &s.PlannedThrough, &lastError, &s.LastErrorAt)
			s.Revision = int(revision)
			s.PausedBy, s.PauseReason, s.LastJobID, s.LastJobState, s.LastError = deref(by), deref(reason), deref(jobID), deref(jobState), deref(lastError)
			list = append(list, s)
			return err
		})
	return list, err
}

// PauseSchedule pauses a schedule (its occurrences are skipped until it is resumed) and says
// whether it changed anything.
func (a *Admin) PauseSchedule(ctx context.Context, namespace, key string, o ActorOptions) (bool, error) {
	return a.scheduleAction(ctx, pauseScheduleSQL, namespace, key, o)
}

// ResumeSchedule resumes a paused schedule from its next occurrence (nothing is caught up) and
// says whether it changed anything.
func (a *Admin) ResumeSchedule(ctx context.Context, namespace, key string, o ActorOptions) (bool, error) {
	return a.scheduleAction(ctx, resumeScheduleSQL, namespace, key, o)
}

// TriggerSchedule enqueues the schedule's job now (also while paused, whatever its overlap rule)
// and returns the job's id.
func (a *Admin) TriggerSchedule(ctx context.Context, namespace, key string, o ActorOptions) (string, error) {
	if err := a.checkSchedule(ctx, namespace, key, o); err != nil {
		return "", err
	}
	var id string
	err := queryRow(ctx, a.db, triggerScheduleSQL, []any{namespace, key, nullable(o.Actor), nullable(o.Reason)}, &id)
	return id, scheduleError(err)
}

// ScheduleHistory returns a schedule's history, newest first, at most limit entries (1 to 1000).
func (a *Admin) ScheduleHistory(ctx context.Context, namespace, key string, limit int) ([]ScheduleHistoryEntry, error) {
	if err := a.checkSchedule(ctx, namespace, key, ActorOptions{}); err != nil {
		return nil, err
	}
	if _, err := checkParamInt(limit, "limit"); err != nil {
		return nil, err
	}
	list := []ScheduleHistoryEntry{}
	err := queryAll(ctx, a.db, scheduleHistorySQL,
		[]any{namespace, key, limit}, func(r rows) error {
			var h ScheduleHistoryEntry
			var revision int64
			var actor, role, reason, jobID *string
			err := r.Scan(&revision, &h.At, &h.Change, &h.Definition, &actor, &role, &reason, &jobID)
			h.Revision, h.Actor, h.LoginRole, h.Reason, h.JobID = int(revision), deref(actor), deref(role), deref(reason), deref(jobID)
			list = append(list, h)
			return err
		})
	return list, scheduleError(err)
}

func (a *Admin) scheduleAction(ctx context.Context, statement, namespace, key string, o ActorOptions) (bool, error) {
	if err := a.checkSchedule(ctx, namespace, key, o); err != nil {
		return false, err
	}
	var changed bool
	err := queryRow(ctx, a.db, statement, []any{namespace, key, nullable(o.Actor), nullable(o.Reason)}, &changed)
	return changed, scheduleError(err)
}

// checkSchedule: names and actor as text can hold them; that they are names, and their bounds,
// is the SQL functions' to check.
func (a *Admin) checkSchedule(ctx context.Context, namespace, key string, o ActorOptions) error {
	if err := checkText(namespace, "namespace"); err != nil {
		return err
	}
	if err := checkText(key, "key"); err != nil {
		return err
	}
	if err := checkActor(o); err != nil {
		return err
	}
	return a.schema.check(ctx, a.db)
}

// scheduleError types the server's P1010 (fromDriverError leaves it a ProtocolError).
func scheduleError(err error) error {
	if p, ok := err.(*ProtocolError); ok && p.Code == SQLStateScheduleNotFound {
		return &ScheduleNotFoundError{ValidationError{Field: p.Field, Message: p.Message}}
	}
	return err
}
