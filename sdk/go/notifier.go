package workhorse

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// startNotifier wakes the worker when a queue it serves gains ready work (delivered at commit).
// Polling stays the source of truth: a lost notification only costs latency. A broken LISTEN
// connection is reopened with capped, jittered backoff, and the worker is woken after each
// (re)connection in case something arrived meanwhile.
func (w *Worker) startNotifier(ctx context.Context) {
	queues := make(map[string]bool, len(w.s.queues))
	for _, q := range w.s.queues {
		queues[q] = true
	}
	w.services.Add(1)
	go func() {
		defer w.services.Done()
		failures := 0
		for {
			listening := func(conn *pgx.Conn) error {
				if _, err := conn.Exec(ctx, listenSQL); err != nil {
					return err
				}
				failures = 0
				w.wakeAll()
				for {
					n, err := conn.WaitForNotification(ctx)
					if err != nil {
						return err
					}
					if n.Channel == notifyChannel && queues[n.Payload] {
						w.wakeAll()
					}
				}
			}
			var err error
			if w.s.listenURL != "" {
				err = listenURL(ctx, w.s.listenURL, listening)
			} else {
				err = w.pool.listen(ctx, listening)
			}
			if ctx.Err() != nil {
				return
			}
			w.reportError("listen", err)
			if errors.Is(err, errListenUnsupported) {
				return
			}
			failures++
			backoff := jitter(min(30*time.Second, 250*time.Millisecond<<min(failures, 7)), 0.5, 1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}()
}
