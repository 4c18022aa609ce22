package workhorse

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"
)

// SDKVersion is this SDK's release, reported in the registry of live workers as "go/" +
// SDKVersion (Admin.listWorkers in TypeScript shows it as the worker's version, which tells
// its language).
const SDKVersion = "0.1.0"

// startRegistration keeps the worker in the registry of live workers (report_worker_v2, see
// sql/095_workers.sql): a report on the pool every heartbeat interval with the jobs it holds,
// whose answer says whether an operator asked it to drain (Admin.drainWorker in TypeScript,
// `workhorse workers drain`). A drained worker claims no more jobs, finishes those it holds
// and stays idle until it is stopped. One small statement per period: nothing of it runs per job.
// The first report registers and answers a secret that binds the row to this worker; later
// reports and the unregistering present it. A refused report (*NotYoursError: the row is gone,
// or another live process holds the id) forgets it, so the next period registers again.
func (w *Worker) startRegistration(ctx context.Context) {
	host, _ := os.Hostname()
	info, _ := json.Marshal(map[string]any{
		"host": host, "pid": os.Getpid(), "queues": w.s.queues, "concurrency": w.s.concurrency,
		"version": "go/" + SDKVersion, "startedAt": time.Now().UTC().Format(time.RFC3339Nano),
		"periodMs": w.s.heartbeat.Milliseconds(),
	})
	w.services.Add(1)
	go func() {
		defer w.services.Done()
		ticker := time.NewTicker(w.s.heartbeat)
		defer ticker.Stop()
		for {
			var drain bool
			var secret *string
			err := queryRow(ctx, w.db, reportWorkerSQL,
				[]any{w.s.workerID, string(info), w.activeCount(), w.registrySecret.Load()}, &drain, &secret)
			var notYours *NotYoursError
			switch {
			case err == nil && secret != nil:
				w.registrySecret.Store(secret)
			case errors.As(err, &notYours):
				w.registrySecret.Store(nil)
			}
			if err != nil && ctx.Err() == nil {
				w.reportError("report", err)
			}
			if drain && w.draining.CompareAndSwap(false, true) {
				w.claiming.Store(false)
				w.emit(Event{Name: EventWorkerDraining})
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			case <-w.reportNow:
			}
		}
	}()
}

// unregister leaves the registry once the worker stopped (a failure is reported; the row then
// turns `gone`).
func (w *Worker) unregister() {
	secret := w.registrySecret.Swap(nil)
	if secret == nil {
		return
	}
	var found bool
	err := queryRow(context.Background(), w.db, unregisterWorkerSQL, []any{w.s.workerID, *secret}, &found)
	if err != nil {
		w.reportError("report", err)
	}
}

// Draining says whether an operator asked this worker to drain: it claims no more jobs and
// finishes those it holds, then stays idle until it is stopped (a drain takes a worker out of
// service before its process is stopped).
func (w *Worker) Draining() bool { return w.draining.Load() }
