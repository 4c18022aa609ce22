package workhorse

import (
	"context"
	"encoding/json"
	"time"
)

// WorkerStatus is where a registered worker stands.
type WorkerStatus string

const (
	// WorkerRunning: claiming jobs.
	WorkerRunning WorkerStatus = "running"
	// WorkerDraining: asked to drain, still finishing jobs.
	WorkerDraining WorkerStatus = "draining"
	// WorkerDrained: asked to drain and holding none: safe to stop.
	WorkerDrained WorkerStatus = "drained"
	// WorkerGone: silent for three report periods (crashed, hung or cut off); its jobs come back
	// when their leases expire.
	WorkerGone WorkerStatus = "gone"
)

// WorkerInfo is a worker in the registry of live workers, in any language.
type WorkerInfo struct {
	WorkerID    string
	Status      WorkerStatus
	Host        string
	PID         int
	Queues      []string
	Concurrency int
	// InFlight is how many jobs it held at its last report.
	InFlight int
	// Version is the client's release: "go/0.1.0" for this SDK, the package version for TypeScript.
	Version          string
	StartedAt        time.Time
	LastSeenAt       time.Time
	DrainRequestedAt *time.Time
	DrainRequestedBy string
	// DrainLoginRole is the login role (session_user) of the session that asked for the drain
	// ("" for a request made before the schema recorded it); DrainRequestedBy is its actor.
	DrainLoginRole string
	DrainReason    string
}

// DrainResult is what Admin.DrainWorker did.
type DrainResult string

const (
	DrainRequested        DrainResult = "requested"
	DrainAlreadyRequested DrainResult = "already_requested"
	DrainNotFound         DrainResult = "not_found"
)

// ListWorkers lists the registered workers, newest first, with their status.
func (a *Admin) ListWorkers(ctx context.Context) ([]WorkerInfo, error) {
	if err := a.schema.check(ctx, a.db); err != nil {
		return nil, err
	}
	list := []WorkerInfo{}
	err := queryAll(ctx, a.db, listWorkersSQL, nil,
		func(r rows) error {
			var w WorkerInfo
			var status, queues string
			var pid, concurrency, inFlight int64
			var by, role, reason *string
			if err := r.Scan(&w.WorkerID, &status, &w.Host, &pid, &queues, &concurrency, &inFlight, &w.Version,
				&w.StartedAt, &w.LastSeenAt, &w.DrainRequestedAt, &by, &role, &reason); err != nil {
				return err
			}
			w.Status, w.PID, w.Concurrency, w.InFlight = WorkerStatus(status), int(pid), int(concurrency), int(inFlight)
			w.DrainRequestedBy, w.DrainLoginRole, w.DrainReason = deref(by), deref(role), deref(reason)
			if err := json.Unmarshal([]byte(queues), &w.Queues); err != nil {
				return err
			}
			list = append(list, w)
			return nil
		})
	return list, err
}

// DrainWorker asks a worker (of any language) to drain: within its report period it stops
// claiming and finishes the jobs it holds.
func (a *Admin) DrainWorker(ctx context.Context, workerID string, o ActorOptions) (DrainResult, error) {
	if err := checkText(workerID, "workerId"); err != nil {
		return "", err
	}
	if err := checkActor(o); err != nil {
		return "", err
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return "", err
	}
	s, err := status(ctx, a.db, drainWorkerSQL, workerID, nullable(o.Actor), nullable(o.Reason))
	return DrainResult(s), err
}
