package workhorse

import (
	"context"
	"encoding/json"
	"os"
	"time"
)

// SDKVersion is this SDK's release, reported in the registry of live workers as "go/" +
// SDKVersion (Admin.listWorkers in TypeScript shows it as the worker's version, which tells
// its language).
const SDKVersion = "0.1.0"

// startRegistration keeps the worker in the registry of live workers (report_worker_v1, see
// sql/095_workers.sql): a report on the pool every heartbeat interval with the jobs it holds,
// whose answer says whether an operator asked it to drain (Admin.drainWorker in TypeScript,
// `workhorse workers drain`). A drained worker claims no more jobs, finishes those it holds
// and stays idle until it is stopped. One small statement per period: nothing of it runs per job.
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
			err := queryRow(ctx, w.db, "SELECT workhorse.report_worker_v1($1, $2::jsonb, $3)",
				[]any{w.s.workerID, string(info), w.activeCount()}, &drain)
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
	var found bool
	err := queryRow(context.Background(), w.db, "SELECT workhorse.unregister_worker_v1($1)", []any{w.s.workerID}, &found)
	if err != nil {
		w.reportError("report", err)
	}
}

// Draining says whether an operator asked this worker to drain: it claims no more jobs and
// finishes those it holds, then stays idle until it is stopped (a drain takes a worker out of
// service before its process is stopped).
func (w *Worker) Draining() bool { return w.draining.Load() }
