package workhorse

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// WorkerOptions configure a Worker; the zero value of each field is its default.
type WorkerOptions struct {
	// Queues to claim from (default ["default"]), 1 to 100 names.
	Queues []string
	// Concurrency is how many handlers run at once, 1 to 1000 (default 10).
	Concurrency int
	// RoundTrips is how many claim-and-complete round trips are in flight at once, 1 to 4
	// (default 1), the slots split between them: 2 for many short jobs at a high concurrency.
	RoundTrips int
	// Lease: a job whose lease is not renewed within it is recovered by another worker
	// (default 30 s, 1 s to 24 h).
	Lease time.Duration
	// Heartbeat is the lease renewal interval (default a third of Lease).
	Heartbeat time.Duration
	// Poll is the poll interval when no notification arrives (default 1 s; jittered, backing
	// off to 5x while idle).
	Poll time.Duration
	// Tick is the maintenance interval: promotion of due jobs, lease recovery (default 1 s).
	Tick time.Duration
	// ShutdownTimeout is how long a stop lets running handlers finish before canceling their
	// contexts with a *WorkerShutdownError (default 25 s).
	ShutdownTimeout time.Duration
	// NoListen turns LISTEN/NOTIFY off: the worker polls only (latency = Poll).
	NoListen bool
	// ListenURL is a direct server connection for LISTEN alone, for pools behind a
	// transaction-pooling PgBouncer, where NOTIFY does not reach a pooled LISTEN.
	ListenURL string
	// WorkerID identifies the worker in leases and history (default host:pid:random).
	WorkerID string
	// UnknownTypeDelay: a job of a type this worker has no handler for is handed back for this
	// long (default 5 s).
	UnknownTypeDelay time.Duration
	// OnEvent receives what the worker reports (jobs claimed, ended, errors, ...). It is called
	// from the worker's goroutines, several at once: keep it quick and safe for concurrent use.
	OnEvent func(Event)
	// TracerProvider records each attempt's span (docs/operations.md#tracing). Default: the
	// global one (otel.SetTracerProvider), when the application installed one by Run; without
	// one the worker records no span.
	TracerProvider trace.TracerProvider
}

// settings are WorkerOptions checked, with the defaults filled in.
type settings struct {
	queues           []string
	queuesArray      string
	concurrency      int
	roundTrips       int
	leaseMs          int64
	heartbeat        time.Duration
	poll             time.Duration
	tick             time.Duration
	shutdownTimeout  time.Duration
	listen           bool
	listenURL        string
	workerID         string
	unknownTypeDelay int64
	onEvent          func(Event)
	tracerProvider   trace.TracerProvider
}

func duration(value, byDefault time.Duration, field string, minMs, maxMs int64) (time.Duration, error) {
	if value == 0 {
		value = byDefault
	}
	ms, err := wholeMs(value, field, minMs, maxMs)
	return time.Duration(ms) * time.Millisecond, err
}

// ranged is a duration option within its limits.json range, its default when zero.
func ranged(value time.Duration, field string, r limitRange) (time.Duration, error) {
	return duration(value, time.Duration(r.def())*time.Millisecond, field, r.Min, r.Max)
}

func checkWorkerOptions(o WorkerOptions) (settings, error) {
	s := settings{listen: !o.NoListen, listenURL: o.ListenURL, onEvent: o.OnEvent, tracerProvider: o.TracerProvider}
	w := limits.Worker
	queues := o.Queues
	if len(queues) == 0 {
		queues = w.Queues.Default
	}
	if int64(len(queues)) > w.Queues.Max {
		return s, invalid("queues", "must list %d to %d queue names", w.Queues.Min, w.Queues.Max)
	}
	seen := map[string]bool{}
	for i, q := range queues {
		if err := checkName(q, "queues["+strconv.Itoa(i)+"]"); err != nil {
			return s, err
		}
		if !seen[q] {
			seen[q] = true
			s.queues = append(s.queues, q)
		}
	}
	s.queuesArray = textArray(s.queues)
	s.concurrency, s.roundTrips = o.Concurrency, o.RoundTrips
	if s.concurrency == 0 {
		s.concurrency = int(w.Concurrency.def())
	}
	if s.roundTrips == 0 {
		s.roundTrips = int(w.RoundTrips.def())
	}
	if err := checkRange(int64(s.concurrency), "concurrency", w.Concurrency.Min, w.Concurrency.Max); err != nil {
		return s, err
	}
	if err := checkRange(int64(s.roundTrips), "roundTrips", w.RoundTrips.Min, w.RoundTrips.Max); err != nil {
		return s, err
	}
	if s.roundTrips > s.concurrency {
		return s, invalid("roundTrips", "must be at most concurrency (%d)", s.concurrency)
	}
	lease, err := ranged(o.Lease, "leaseMs", w.LeaseMs)
	if err != nil {
		return s, err
	}
	s.leaseMs = lease.Milliseconds()
	beat := w.HeartbeatMs
	if s.heartbeat, err = duration(o.Heartbeat, (lease / time.Duration(beat.DefaultLeaseDivisor)).Truncate(time.Millisecond), "heartbeatMs", beat.Min, beat.Max); err != nil {
		return s, err
	}
	// A lease renewed no more often than it lasts lapses between two renewals (every SDK refuses it).
	if beat.BelowLeaseMs && s.heartbeat.Milliseconds() >= s.leaseMs {
		return s, invalid("heartbeatMs", "%s", heartbeatNotBelowLease(s.leaseMs))
	}
	if s.poll, err = ranged(o.Poll, "pollMs", w.PollMs); err != nil {
		return s, err
	}
	if s.tick, err = ranged(o.Tick, "tickMs", w.TickMs); err != nil {
		return s, err
	}
	if s.shutdownTimeout, err = ranged(o.ShutdownTimeout, "shutdownTimeoutMs", w.ShutdownTimeoutMs); err != nil {
		return s, err
	}
	delay, err := ranged(o.UnknownTypeDelay, "unknownTypeDelayMs", w.UnknownTypeDelayMs)
	if err != nil {
		return s, err
	}
	s.unknownTypeDelay = delay.Milliseconds()
	s.workerID = o.WorkerID
	if s.workerID == "" {
		host, _ := os.Hostname()
		random := make([]byte, 4)
		_, _ = rand.Read(random)
		s.workerID = host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(random)
	}
	if n := int64(len([]rune(s.workerID))); n < w.WorkerIDLength.Min || n > w.WorkerIDLength.Max {
		return s, invalid("workerId", "must be a string of %d to %d characters", w.WorkerIDLength.Min, w.WorkerIDLength.Max)
	}
	return s, nil
}
