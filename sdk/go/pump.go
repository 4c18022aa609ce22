package workhorse

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"
)

// A lane is one round trip's share of the worker (WorkerOptions.RoundTrips): its slots, the
// completions waiting for its next round trip, and its pump. Each round trip of a lane's pump
// records the completions that gathered since the last one AND claims as many jobs as slots
// will then be free, in one statement and one commit (complete_and_claim_v1): commits are what
// a durable queue pays for, and sharing one between a batch of completions and the next claim
// halves them. Completions that arrive while a round trip is in flight go in the next one.
type lane struct {
	slots int
	wake  chan struct{}

	mu     sync.Mutex
	active int
	// generation is bumped when the worker gives up on the lane's running handlers (a stop's
	// timeout): they no longer count in active.
	generation int
	pending    []completion
	inFlight   bool
}

// completion is a handler's result waiting for its lane's next round trip.
type completion struct {
	run    *run
	result []byte
	// alone: sent in a batch of its own, because a batch it was in was refused and the culprit
	// must be found.
	alone bool
}

// claimRow is a claimed job as complete_and_claim_v1 returns it.
type claimRow struct {
	jobID, queue, typ    string
	payload              []byte
	attempt, maxAttempts int
	fence, timeoutMs     int64
	checkpoints, sleeps  []byte
}

// maxRound is the most jobs one round trip claims and the most completions it records (the
// limits of complete_and_claim_v1).
const maxRound = 1000

func (l *lane) wakeUp() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *lane) push(c completion) {
	l.mu.Lock()
	l.pending = append(l.pending, c)
	l.mu.Unlock()
	l.wakeUp()
}

// take removes the next batch of completions and says how many jobs to claim with it: the
// slots free once the batch is recorded, while the worker claims and the queues were not found
// dry (a round trip that records completions claims anyway: it costs nothing more).
func (l *lane) take(claiming, dry bool) ([]completion, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(len(l.pending), maxRound)
	if n > 0 && l.pending[0].alone {
		n = 1
	}
	var batch []completion
	if n > 0 {
		batch = make([]completion, n)
		copy(batch, l.pending)
		l.pending = l.pending[n:]
	}
	want := 0
	if claiming && (!dry || n > 0) {
		want = max(0, min(maxRound, l.slots-l.active+n))
	}
	l.inFlight = n > 0 || want > 0
	return batch, want
}

func (l *lane) requeue(batch []completion) {
	l.mu.Lock()
	l.pending = append(batch, l.pending...)
	l.inFlight = false
	l.mu.Unlock()
}

func (l *lane) idle() {
	l.mu.Lock()
	l.inFlight = false
	l.mu.Unlock()
}

// gather lets handlers that are about to finish join the next batch: a short job's handler
// ends microseconds after the one that woke the pump, and a round trip (a commit) per handful
// of jobs would cost far more than waiting for them. While the batch is smaller than the
// running handlers it waits for the next completion, up to gatherWindow each. It blocks
// rather than yields: a yielding pump goes to the global run queue and is picked again before
// this P steals the handlers queued on another P, whose thread the kernel may not be running on
// a busy machine (round trips then carried 9 jobs at concurrency 10 instead of 10); a blocked
// pump leaves its P idle, and the P steals and runs them. A handler that really runs long
// delays its lane's round trip by gatherWindow at most.
func (l *lane) gather() {
	var timer *time.Timer
	for {
		l.mu.Lock()
		pending, running := len(l.pending), l.active
		l.mu.Unlock()
		if pending >= running {
			break
		}
		if timer == nil {
			timer = time.NewTimer(gatherWindow)
		} else {
			timer.Reset(gatherWindow)
		}
		select {
		case <-l.wake:
			continue
		case <-timer.C:
		}
		break
	}
	if timer != nil {
		timer.Stop()
	}
}

// gatherWindow is how long gather waits for the next completion before it sends what it has.
const gatherWindow = 200 * time.Microsecond

func (w *Worker) pump(l *lane) {
	defer w.pumps.Done()
	failures := 0
	dry := false
	var poll *time.Timer
	var pollC <-chan time.Time
	for {
		l.gather()
		batch, want := l.take(w.claiming.Load(), dry)
		if len(batch) == 0 && want == 0 {
			if dry && poll == nil && w.claiming.Load() {
				// Idle backoff: each empty claim stretches the next poll, up to five times Poll.
				rounds := float64(w.idleRounds.Load())
				poll = time.NewTimer(jitter(time.Duration(float64(w.s.poll)*min(5, 1+rounds/4)), 0.8, 1.2))
				pollC = poll.C
			}
			select {
			case <-l.wake:
				dry = false
			case <-pollC:
				poll, pollC, dry = nil, nil, false
			case <-w.quit:
				if poll != nil {
					poll.Stop()
				}
				return
			}
			continue
		}
		if poll != nil && want > 0 {
			poll.Stop()
			poll, pollC = nil, nil
		}
		sentAt := time.Now()
		statuses, claimed, traceContexts, err := w.roundTrip(completionItems(batch), want)
		if err != nil {
			var retryLater bool
			dry, retryLater = w.roundTripFailed(l, batch, err)
			if retryLater {
				failures++
				time.Sleep(jitter(time.Duration(min(2000, 50<<min(failures, 6)))*time.Millisecond, 0.5, 1))
			}
			continue
		}
		failures = 0
		for _, c := range batch {
			s := "succeeded"
			if statuses != nil {
				if other, ok := statuses[c.run.job.ID]; ok {
					s = other
				}
			}
			w.reportStatus(c.run, s, nil)
			w.finish(c.run)
		}
		for i := range claimed {
			var traceContext []byte
			if traceContexts != nil {
				traceContext = traceContexts[i]
			}
			w.start(&claimed[i], l, sentAt, traceContext)
		}
		if want > 0 {
			if len(claimed) < want {
				dry = true // the queues ran dry: wait for a notification or the next poll
				w.idleRounds.Add(1)
			} else {
				w.idleRounds.Store(0)
			}
		}
		l.idle()
	}
}

// roundTripFailed puts a failed round trip's completions back. A refusal of the database (a
// typed error) is an answer about the results: one result is refused alone (its attempt
// fails), a batch is split to find it. Otherwise the database could not be reached, or the
// commit's fate is unknown: completions are tried again while the worker holds their leases (a
// completion that did commit is recognised by its fence and answers succeeded again, never a
// second outcome). It says whether the queues count as dry and whether to wait before trying.
func (w *Worker) roundTripFailed(l *lane, batch []completion, err error) (dry, retryLater bool) {
	var invalidInput *ValidationError
	var protocol *ProtocolError
	if errors.As(err, &invalidInput) || errors.As(err, &protocol) {
		if len(batch) == 1 {
			r := batch[0].run
			go func() { w.settle(r, "fail", w.settleFailure(r, err)) }()
			l.idle()
			return false, false
		}
		for i := range batch {
			batch[i].alone = true
		}
		l.requeue(batch)
		return false, false
	}
	during := "claim"
	if len(batch) > 0 {
		during = "complete"
	}
	w.reportError(during, err)
	owned := batch[:0]
	for _, c := range batch {
		if c.run.gaveUp() {
			w.reportStatus(c.run, "stale", nil)
			w.finish(c.run)
		} else {
			owned = append(owned, c)
		}
	}
	l.requeue(owned)
	if len(owned) == 0 {
		w.idleRounds.Add(1)
		return true, false
	}
	return false, true
}

// roundTrip sends one complete_and_claim_v1: the statuses of completions that did not succeed
// (by job id; nil when all did), the claimed jobs and, for a worker that traces, their stored
// trace contexts (kept apart from the rows, which every job pays for).
func (w *Worker) roundTrip(items []byte, want int) (map[string]string, []claimRow, [][]byte, error) {
	var statuses map[string]string
	var claimed []claimRow
	var traceContexts [][]byte
	if want > 0 {
		claimed = make([]claimRow, 0, want)
	}
	keep := func(c *claimRow, s string, attempt, maxAttempts int64) {
		if s != "claimed" {
			if statuses == nil {
				statuses = map[string]string{}
			}
			statuses[c.jobID] = s
			return
		}
		c.attempt, c.maxAttempts = int(attempt), int(maxAttempts)
		claimed = append(claimed, *c)
	}
	statement, scan := pumpSQL, func(r rows) error {
		var c claimRow
		var s string
		var attempt, maxAttempts int64
		if err := r.Scan(&c.jobID, &s, &c.queue, &c.typ, &c.payload, &attempt, &maxAttempts, &c.fence, &c.timeoutMs, &c.checkpoints, &c.sleeps); err != nil {
			return err
		}
		keep(&c, s, attempt, maxAttempts)
		return nil
	}
	if w.tracer != nil {
		traceContexts = make([][]byte, 0, want)
		statement, scan = pumpTracedSQL, func(r rows) error {
			var c claimRow
			var s string
			var attempt, maxAttempts int64
			var traceContext []byte
			if err := r.Scan(&c.jobID, &s, &c.queue, &c.typ, &c.payload, &attempt, &maxAttempts, &c.fence, &c.timeoutMs, &c.checkpoints, &c.sleeps, &traceContext); err != nil {
				return err
			}
			if s == "claimed" {
				traceContexts = append(traceContexts, traceContext)
			}
			keep(&c, s, attempt, maxAttempts)
			return nil
		}
	}
	err := queryAll(context.Background(), w.db, statement, []any{w.s.workerID, string(items), w.s.queuesArray, want, w.s.leaseMs}, scan)
	return statuses, claimed, traceContexts, err
}

// completionItems is [{"jobId", "fence", "result"}] as JSON text, written directly: it runs for
// every job, and the result is JSON text already.
func completionItems(batch []completion) []byte {
	size := 2
	for _, c := range batch {
		size += 70 + len(c.result)
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	for i, c := range batch {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendLease(out, c.run.job)
		out = append(out, `,"result":`...)
		out = append(out, c.result...)
		out = append(out, '}')
	}
	return append(out, ']')
}

// appendLease writes `{"jobId":"…","fence":…` (left open for more fields).
func appendLease(out []byte, job *Job) []byte {
	out = append(out, `{"jobId":"`...)
	out = append(out, job.ID...)
	out = append(out, `","fence":`...)
	return strconv.AppendInt(out, job.FenceToken, 10)
}
