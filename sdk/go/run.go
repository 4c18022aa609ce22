package workhorse

import (
	"context"
	"errors"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"
)

// Why the worker stopped a handler, or stopped caring about its outcome.
const (
	outcomeNone int32 = iota
	outcomeLost
	outcomeCanceled
	outcomeAbandoned
	outcomeTimeout
	outcomeSleeping
)

// run is a job the worker runs, and its lease as the heartbeater renews it.
type run struct {
	job       *Job
	lane      *lane
	ctx       context.Context
	cancel    context.CancelCauseFunc
	startedAt time.Time
	// generation is the lane generation the run counts in (see lane.generation).
	generation int
	// deadline (Unix ms) after which the lease must be presumed lost; renewed by heartbeats.
	deadline atomic.Int64
	// renewing: the heartbeater renews the lease while true.
	renewing atomic.Bool
	outcome  atomic.Int32
	finished atomic.Bool
	timer    *time.Timer
}

// setOutcome records why the worker stopped the run: only the first reason counts, except that
// a lost lease (force) overrides any reason but another loss or an abandonment.
func (r *run) setOutcome(o int32, force bool) bool {
	for {
		current := r.outcome.Load()
		if current != outcomeNone && !(force && current != outcomeLost && current != outcomeAbandoned) {
			return false
		}
		if r.outcome.CompareAndSwap(current, o) {
			return true
		}
	}
}

// gaveUp: the worker no longer records anything for the run's own outcome.
func (r *run) gaveUp() bool {
	o := r.outcome.Load()
	return o == outcomeLost || o == outcomeAbandoned || o == outcomeSleeping
}

// start begins a claimed job: the run is registered (its lease renewed from now on) and its
// handler runs in a goroutine of its own.
func (w *Worker) start(c *claimRow, l *lane, sentAt time.Time, traceContext []byte) {
	job := &Job{
		ID: c.jobID, Queue: c.queue, Type: c.typ, Attempt: c.attempt, MaxAttempts: c.maxAttempts,
		WorkerID: w.s.workerID, FenceToken: c.fence, w: w, checkpointsJSON: c.checkpoints, sleepsJSON: c.sleeps,
	}
	r := &run{job: job, lane: l, startedAt: time.Now()}
	job.run = r
	base := w.base
	if w.tracer != nil {
		base, _ = startAttempt(base, w.tracer, job, traceContext)
	}
	r.ctx, r.cancel = context.WithCancelCause(base)
	r.deadline.Store(sentAt.UnixMilli() + w.s.leaseMs)
	r.renewing.Store(true)
	l.mu.Lock()
	r.generation = l.generation
	l.active++
	l.mu.Unlock()
	w.mu.Lock()
	w.running[job.ID] = r
	w.mu.Unlock()
	w.emit(w.jobEvent(EventJobClaimed, r, false))
	if c.timeoutMs > 0 {
		// The server closes the attempt by its own clock, counted from the claim (which came after
		// sentAt); this timer only tells the handler, no later than that.
		timeout := time.Duration(c.timeoutMs) * time.Millisecond
		r.timer = time.AfterFunc(time.Until(sentAt.Add(timeout)), func() {
			if r.setOutcome(outcomeTimeout, false) {
				r.cancel(&ExecutionTimeoutError{JobID: job.ID, Timeout: timeout})
			}
		})
	}
	go w.execute(r, c.payload)
}

// execute runs the job's handler. A result goes to the lane's next round trip, which records
// it; every other ending (no handler, an error, a panic) is recorded here.
func (w *Worker) execute(r *run, payload []byte) {
	h := w.handlers[r.job.Type]
	if h == nil {
		w.settle(r, "release", w.release(r, "no handler for job type \""+r.job.Type+"\" on worker "+w.s.workerID))
		return
	}
	if h.transactional {
		w.settle(r, "transaction", w.executeInTx(r, h, payload))
		return
	}
	result, err := invoke(h, r, payload)
	if err == nil && r.gaveUp() {
		err = context.Cause(r.ctx)
	}
	if err == nil {
		r.lane.push(completion{run: r, result: result})
		return
	}
	w.settle(r, "fail", w.settleFailure(r, err))
}

func invoke(h *handler, r *run, payload []byte) (result []byte, err error) {
	defer func() {
		if value := recover(); value != nil {
			err = &panicError{value: value, stack: string(debug.Stack())}
		}
	}()
	return h.fn(r.ctx, r.job, payload)
}

// settle frees the run's slot once what it records is recorded (or could not be: then the
// lease expires and the job runs again).
func (w *Worker) settle(r *run, during string, err error) {
	if err != nil {
		w.reportError(during, err)
	}
	w.finish(r)
}

// finish: the job is over for this worker (recorded, given up or abandoned); its slot is free.
func (w *Worker) finish(r *run) {
	if !r.finished.CompareAndSwap(false, true) {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	r.renewing.Store(false)
	if span := r.span(); span != nil {
		span.End()
	}
	w.mu.Lock()
	if w.running[r.job.ID] == r {
		delete(w.running, r.job.ID)
	}
	w.mu.Unlock()
	l := r.lane
	l.mu.Lock()
	if r.generation == l.generation {
		l.active--
	}
	l.mu.Unlock()
	l.wakeUp()
	r.cancel(context.Canceled)
	if w.draining.Load() && w.activeCount() == 0 {
		// Report at once, so the registry shows the worker drained.
		select {
		case w.reportNow <- struct{}{}:
		default:
		}
	}
}

func (w *Worker) loseLease(r *run) {
	if r.setOutcome(outcomeLost, true) {
		r.cancel(&LeaseLostError{JobID: r.job.ID})
	}
}

func (w *Worker) sleepRun(r *run, wakeAt time.Time) {
	if !r.setOutcome(outcomeSleeping, false) {
		return
	}
	r.renewing.Store(false)
	r.traceOutcome("parked")
	r.cancel(&JobSleepingError{JobID: r.job.ID, WakeAt: wakeAt})
	e := w.jobEvent(EventJobSleeping, r, false)
	e.WakeAt = wakeAt
	w.emit(e)
}

// parkRun: the job parked (blocked on children, a signal or a decision; or it ended by a
// pending cancel while parking): the worker lets go of it, as after a durable sleep.
func (w *Worker) parkRun(r *run, reason error, waitingFor string) {
	if !r.setOutcome(outcomeSleeping, false) {
		return
	}
	r.renewing.Store(false)
	r.cancel(reason)
	if _, canceled := reason.(*JobCanceledError); canceled {
		r.traceOutcome("canceled")
		w.emit(w.jobEvent(EventJobCanceled, r, true))
		return
	}
	r.traceOutcome("parked")
	e := w.jobEvent(EventJobBlocked, r, false)
	e.WaitingFor = waitingFor
	w.emit(e)
}

// settleFailure records how a run that did not return a result ended: a failed attempt
// (fail_v1, which retries by the job's policy), an acknowledged cancellation, or nothing at
// all (the job sleeps, or the worker lost it).
func (w *Worker) settleFailure(r *run, handlerErr error) error {
	job := r.job
	switch r.outcome.Load() {
	case outcomeSleeping:
		return nil
	case outcomeLost, outcomeAbandoned:
		r.traceOutcome("lease_lost")
		w.emit(w.jobEvent(EventJobLeaseLost, r, true))
		return nil
	case outcomeCanceled:
		s, err := status(context.Background(), w.db, acknowledgeCancelSQL, job.ID, job.WorkerID, job.FenceToken)
		if err == nil {
			w.reportStatus(r, s, nil)
		}
		return err
	}
	// A handler that returned its canceled context's error stopped because of the cause.
	if errors.Is(handlerErr, context.Canceled) && context.Cause(r.ctx) != context.Canceled {
		handlerErr = context.Cause(r.ctx)
	}
	if span := r.span(); span != nil {
		recordFailure(span, handlerErr)
	}
	options := []byte{'{'}
	add := func(field string) {
		if len(options) > 1 {
			options = append(options, ',')
		}
		options = append(options, field...)
	}
	var nonRetryable *NonRetryableError
	if errors.As(handlerErr, &nonRetryable) {
		add(`"nonRetryable":true`)
	}
	var retryAfter *RetryAfterError
	if errors.As(handlerErr, &retryAfter) && retryAfter.Delay >= 0 && retryAfter.Delay <= time.Duration(maxDelayMs)*time.Millisecond {
		add(`"retryDelayMs":` + strconv.FormatInt(retryAfter.Delay.Milliseconds(), 10))
	}
	if r.outcome.Load() == outcomeTimeout {
		add(`"attemptOutcome":"timeout"`)
	}
	if retry := w.handlers[job.Type].retry; retry != nil {
		add(`"retryPolicy":` + string(retry))
	}
	options = append(options, '}')
	envelope := ToErrorEnvelope(handlerErr)
	envelope.Name, envelope.Message, envelope.Stack = storable(envelope.Name), storable(envelope.Message), storable(envelope.Stack)
	envelopeJSON, err := toJSON(envelope, "error", maxJSONBytes)
	if err != nil {
		return err
	}
	var s string
	var runAt *time.Time
	var delayMs *int64
	err = queryRow(context.Background(), w.db, failSQL,
		[]any{job.ID, job.WorkerID, job.FenceToken, string(envelopeJSON), string(options)}, &s, &runAt, &delayMs)
	if err != nil {
		return err
	}
	if s == "retry_scheduled" && runAt != nil && delayMs != nil {
		r.traceOutcome(s)
		e := w.jobEvent(EventJobRetryScheduled, r, true)
		e.Envelope, e.RunAt, e.Delay = &envelope, *runAt, time.Duration(*delayMs)*time.Millisecond
		w.emit(e)
		return nil
	}
	w.reportStatus(r, s, &envelope)
	return nil
}

// reportStatus reports how a job ended, as an event.
func (w *Worker) reportStatus(r *run, s string, envelope *ErrorEnvelope) {
	if w.tracer != nil {
		if s == "stale" {
			r.traceOutcome("lease_lost")
		} else {
			r.traceOutcome(s)
		}
	}
	switch s {
	case "succeeded":
		w.emit(w.jobEvent(EventJobSucceeded, r, true))
	case "canceled":
		w.emit(w.jobEvent(EventJobCanceled, r, true))
	case "failed":
		e := w.jobEvent(EventJobFailed, r, true)
		e.Envelope = envelope
		w.emit(e)
	case "stale":
		if r.outcome.Load() != outcomeAbandoned {
			w.emit(w.jobEvent(EventJobLeaseLost, r, true))
		}
	}
}

// release hands a job of a type without a handler back, without consuming its attempt.
func (w *Worker) release(r *run, reason string) error {
	job := r.job
	s, err := status(context.Background(), w.db, releaseSQL,
		job.ID, job.WorkerID, job.FenceToken, w.s.unknownTypeDelay, reason)
	if err != nil {
		return err
	}
	if s == "released" {
		r.traceOutcome(s)
		e := w.jobEvent(EventJobReleased, r, false)
		e.Reason = reason
		w.emit(e)
	} else {
		w.reportStatus(r, s, nil)
	}
	return nil
}
