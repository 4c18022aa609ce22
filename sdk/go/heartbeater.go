package workhorse

import (
	"context"
	"time"
)

// startHeartbeater renews every lease the worker holds in one heartbeat_many_v1 round per
// interval, on a connection of its own so that busy handlers holding pool connections cannot
// starve renewal. A lease that could not be renewed within its length is given up locally
// (the handler's context is canceled with a *LeaseLostError) before the server could hand the
// job to another worker.
func (w *Worker) startHeartbeater(ctx context.Context) {
	w.services.Add(1)
	go func() {
		defer w.services.Done()
		var conn ownConn
		defer func() {
			if conn != nil {
				conn.close()
			}
		}()
		ticker := time.NewTicker(w.s.heartbeat)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			batch := w.leasesToRenew()
			if len(batch) == 0 {
				continue
			}
			if conn == nil {
				var err error
				if conn, err = w.pool.connect(ctx); err != nil {
					w.reportError("heartbeat", err)
					conn = nil
					continue
				}
			}
			if err := w.beat(ctx, conn, batch); err != nil {
				if ctx.Err() != nil {
					return
				}
				w.reportError("heartbeat", err)
				// The connection may be broken: open a new one next round.
				conn.close()
				conn = nil
			}
		}
	}()
}

// leasesToRenew gives up the leases whose deadline passed and returns the others.
func (w *Worker) leasesToRenew() []*run {
	now := time.Now().UnixMilli()
	var batch, lost []*run
	w.mu.Lock()
	for _, r := range w.running {
		if !r.renewing.Load() {
			continue
		}
		if now >= r.deadline.Load() {
			lost = append(lost, r)
		} else {
			batch = append(batch, r)
		}
	}
	w.mu.Unlock()
	for _, r := range lost {
		r.renewing.Store(false)
		w.loseLease(r)
	}
	return batch
}

func (w *Worker) beat(ctx context.Context, conn ownConn, batch []*run) error {
	leases := make([]byte, 0, 64*len(batch))
	leases = append(leases, '[')
	byID := make(map[string]*run, len(batch))
	for i, r := range batch {
		if i > 0 {
			leases = append(leases, ',')
		}
		leases = append(appendLease(leases, r.job), '}')
		byID[r.job.ID] = r
	}
	leases = append(leases, ']')
	sentAt := time.Now().UnixMilli()
	return queryAll(ctx, conn, heartbeatManySQL,
		[]any{w.s.workerID, string(leases), w.s.leaseMs}, func(row rows) error {
			var id, s string
			if err := row.Scan(&id, &s); err != nil {
				return err
			}
			r := byID[id]
			if r == nil || !r.renewing.Load() {
				return nil
			}
			switch s {
			case "stale":
				r.renewing.Store(false)
				w.loseLease(r)
			case "accepted", "cancel_requested":
				// The server renewed the lease after we sent the request, so this bound is safe.
				r.deadline.Store(sentAt + w.s.leaseMs)
				if s == "cancel_requested" && r.setOutcome(outcomeCanceled, false) {
					r.cancel(&JobCanceledError{JobID: id})
				}
			}
			// "busy": another transaction holds the row; renewed next round.
			return nil
		})
}
