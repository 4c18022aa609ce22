package workhorse

import (
	"context"
	"encoding/json"
	"math"
	"time"
)

// Health and retention: each one statement whose answer is a JSON document, the same in every
// SDK (docs/operations.md). The server checks thresholds and settings and names the bad field.

// ThresholdPair is a level pair of a health threshold: the value at which a reason turns "warn",
// and "critical". A nil level keeps its default; math.Inf(1) means never.
type ThresholdPair struct {
	Warn     *float64
	Critical *float64
}

// HealthThresholds are the thresholds of Admin.Health; each nil one keeps its defaults.
type HealthThresholds struct {
	// OldestReadyMs: wait of a queue's oldest ready job, ms (default warn 60 000, critical 600 000).
	OldestReadyMs *ThresholdPair
	// ExpiredLeases: active jobs whose lease ran out over 10 s ago, per queue (default warn 1, critical 100).
	ExpiredLeases *ThresholdPair
	// FailedLastHour: jobs of a queue that failed for good in the last hour (default warn 10, critical 100).
	FailedLastHour *ThresholdPair
	// RetentionLagMs: how far retention is behind its window, ms (default warn 1 day, critical 7 days).
	RetentionLagMs *ThresholdPair
	// ReadyWithoutWorkers: ready jobs while no worker is registered as running (default warn 1, critical never).
	ReadyWithoutWorkers *ThresholdPair
	// MaintenanceStaleMs: time since the last maintenance tick, and since the last retention pass
	// when retention is enabled, ms (default warn 60 000, critical 900 000).
	MaintenanceStaleMs *ThresholdPair
}

// HealthReason is why the status is not "ok": Code is "oldest_ready_age", "expired_leases",
// "dead_letters", "retention_lag", "ready_without_workers", "partitions_missing",
// "maintenance_stale" or "retention_stale" (docs/operations.md says what to do about each).
type HealthReason struct {
	Code  string `json:"code"`
	Level string `json:"level"`
	// Queue is the queue it concerns ("" for the whole database).
	Queue     string  `json:"queue"`
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
}

// QueueHealth is one queue's part of a HealthReport.
type QueueHealth struct {
	Queue          string  `json:"queue"`
	Blocked        int     `json:"blocked"`
	Scheduled      int     `json:"scheduled"`
	Ready          int     `json:"ready"`
	Active         int     `json:"active"`
	OldestReadyMs  float64 `json:"oldestReadyMs"`
	ExpiredLeases  int     `json:"expiredLeases"`
	FailedLastHour int     `json:"failedLastHour"`
}

// HealthReport is one consistent snapshot of the queue's health, read by one statement.
type HealthReport struct {
	// Status is "ok", "warn" or "critical": the worst level among the reasons.
	Status    string    `json:"status"`
	CheckedAt time.Time `json:"checkedAt"`
	// Reasons for the status, critical ones first; empty when ok.
	Reasons []HealthReason `json:"reasons"`
	Queues  []QueueHealth  `json:"queues"`
	Workers struct {
		Running  int `json:"running"`
		Draining int `json:"draining"`
		Gone     int `json:"gone"`
	} `json:"workers"`
	Retention struct {
		Enabled bool     `json:"enabled"`
		LagMs   *float64 `json:"lagMs"`
	} `json:"retention"`
	// MissingPartitions: today's and tomorrow's history partitions that do not exist.
	MissingPartitions []string `json:"missingPartitions"`
	Maintenance       struct {
		TickLastRunAt      *time.Time `json:"tickLastRunAt"`
		RetentionLastRunAt *time.Time `json:"retentionLastRunAt"`
	} `json:"maintenance"`
}

// RetentionSettings are the settings SetRetention changes; nil ones keep their values.
type RetentionSettings struct {
	// Enabled: the maintenance tick applies the policy (default true).
	Enabled *bool
	// JobEventDays: days of job events kept (default 14).
	JobEventDays *int
	// AttemptHistoryDays: days of closed attempts kept (default 14).
	AttemptHistoryDays *int
	// FinishedJob: how long a finished job is kept after it finished, whole ms, at least 1 s (default 30 days).
	FinishedJob *time.Duration
}

// RetentionStatus is the retention policy and how far retention got.
type RetentionStatus struct {
	Policy struct {
		Enabled            bool       `json:"enabled"`
		JobEventDays       int        `json:"jobEventDays"`
		AttemptHistoryDays int        `json:"attemptHistoryDays"`
		FinishedJobMs      int64      `json:"finishedJobMs"`
		ChangedAt          *time.Time `json:"changedAt"`
		ChangedBy          string     `json:"changedBy"`
		LoginRole          string     `json:"loginRole"`
	} `json:"policy"`
	LastRunAt *time.Time `json:"lastRunAt"`
	// CoveredUntil: every job created before this time has been looked at.
	CoveredUntil *time.Time `json:"coveredUntil"`
	// LagMs: how far CoveredUntil is behind the window's start (nil before the first run).
	LagMs *int64 `json:"lagMs"`
	// DeferredJobs: jobs passed over for now (live, finished too recently, still referenced).
	DeferredJobs            int    `json:"deferredJobs"`
	JobsPurged              int64  `json:"jobsPurged"`
	PartitionsDropped       int64  `json:"partitionsDropped"`
	LockTimeouts            int64  `json:"lockTimeouts"`
	OldestJobEventDay       string `json:"oldestJobEventDay"`
	OldestAttemptHistoryDay string `json:"oldestAttemptHistoryDay"`
	ExpiredPartitions       int    `json:"expiredPartitions"`
}

// RetentionRun is what one retention pass did.
type RetentionRun struct {
	// Skipped: another pass was running, or the policy is disabled (then Disabled too).
	Skipped           bool `json:"skipped"`
	Disabled          bool `json:"disabled"`
	JobsPurged        int  `json:"jobsPurged"`
	JobsExamined      int  `json:"jobsExamined"`
	PartitionsDropped int  `json:"partitionsDropped"`
	LockTimeouts      int  `json:"lockTimeouts"`
	// More: the budget ran out with work left.
	More bool `json:"more"`
}

// Health reads one consistent snapshot of the queue's health: per queue the live jobs by
// state, the oldest ready job's wait, expired leases not yet recovered and dead letters of the
// last hour; live workers; retention lag; missing history partitions; and a status ("ok",
// "warn", "critical") with the reasons for it.
//
//	report, err := admin.Health(ctx, workhorse.HealthThresholds{})
//	if report.Status != "ok" { log.Print(report.Reasons) }
func (a *Admin) Health(ctx context.Context, t HealthThresholds) (*HealthReport, error) {
	wire := map[string]map[string]*float64{}
	for key, pair := range map[string]*ThresholdPair{
		"oldestReadyMs": t.OldestReadyMs, "expiredLeases": t.ExpiredLeases, "failedLastHour": t.FailedLastHour,
		"retentionLagMs": t.RetentionLagMs, "readyWithoutWorkers": t.ReadyWithoutWorkers, "maintenanceStaleMs": t.MaintenanceStaleMs,
	} {
		if pair == nil {
			continue
		}
		levels := map[string]*float64{}
		for level, value := range map[string]*float64{"warn": pair.Warn, "critical": pair.Critical} {
			switch {
			case value == nil:
			case math.IsInf(*value, 1):
				levels[level] = nil // JSON null: never
			case math.IsNaN(*value) || math.IsInf(*value, -1):
				return nil, invalid("thresholds."+key+"."+level, "must be a number of at least 0, or null (never)")
			default:
				levels[level] = value
			}
		}
		wire[key] = levels
	}
	body, _ := json.Marshal(wire)
	report := &HealthReport{}
	if err := a.document(ctx, healthSQL, []any{string(body)}, report); err != nil {
		return nil, err
	}
	return report, nil
}

// RetentionStatus reads the retention policy and how far retention got (docs/operations.md#retention).
func (a *Admin) RetentionStatus(ctx context.Context) (*RetentionStatus, error) {
	status := &RetentionStatus{}
	if err := a.document(ctx, retentionStatusSQL, nil, status); err != nil {
		return nil, err
	}
	return status, nil
}

// SetRetention changes the retention policy (settings left nil keep their values), recording
// actor as who changed it; the maintenance tick applies it from its next pass.
func (a *Admin) SetRetention(ctx context.Context, s RetentionSettings, actor string) error {
	wire := map[string]any{}
	if s.Enabled != nil {
		wire["enabled"] = *s.Enabled
	}
	if s.JobEventDays != nil {
		wire["jobEventDays"] = *s.JobEventDays
	}
	if s.AttemptHistoryDays != nil {
		wire["attemptHistoryDays"] = *s.AttemptHistoryDays
	}
	if s.FinishedJob != nil {
		if *s.FinishedJob%time.Millisecond != 0 {
			return invalid("finishedJobMs", "must be a whole number of milliseconds")
		}
		wire["finishedJobMs"] = s.FinishedJob.Milliseconds()
	}
	body, _ := json.Marshal(wire)
	if err := a.schema.check(ctx, a.db); err != nil {
		return err
	}
	var ignored *string
	return queryRow(ctx, a.db, setRetentionSQL, []any{string(body), nullable(actor)}, &ignored)
}

// RunRetention runs one retention pass now (the maintenance tick runs one per tick anyway):
// it drops expired history partitions and looks at up to budget jobs (0: 10 000; at most
// 1 000 000), removing those whose window has passed. Skipped when another pass runs.
func (a *Admin) RunRetention(ctx context.Context, budget int) (*RetentionRun, error) {
	run := &RetentionRun{}
	if err := a.document(ctx, retentionRunSQL, []any{defaultLimit(budget, 10_000)}, run); err != nil {
		return nil, err
	}
	return run, nil
}

// document runs a statement that answers one JSON document and decodes it into into.
func (a *Admin) document(ctx context.Context, statement string, args []any, into any) error {
	if err := a.schema.check(ctx, a.db); err != nil {
		return err
	}
	var doc []byte
	if err := queryRow(ctx, a.db, statement, args, &doc); err != nil {
		return err
	}
	return json.Unmarshal(doc, into)
}
