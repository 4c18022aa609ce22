package workhorse

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// HandlerOptions are the per-type options of [Handle].
type HandlerOptions struct {
	// Retry is the retry policy of this type's jobs enqueued without one of their own.
	Retry *RetryPolicy
}

// handler is a registered handler with its payload and result types erased to JSON.
type handler struct {
	fn    func(ctx context.Context, job *Job, payload []byte) ([]byte, error)
	retry []byte
	// transactional: fn runs in a transaction that also records its success (HandleTx).
	transactional bool
}

// Worker claims jobs from PostgreSQL and runs the handler registered for each job's type. It
// asks for exactly its free slots in each claim, and records a batch of completions in the
// same statement (complete_and_claim_v1, the TypeScript worker's hot path); it wakes on
// LISTEN/NOTIFY with polling as the fallback, renews all leases in one batched heartbeat on a
// connection of its own, offers maintenance ticks, and drains on stop.
//
//	worker, err := workhorse.NewWorker(workhorse.Pgx(pool), workhorse.WorkerOptions{Queues: []string{"orders"}})
//	workhorse.Handle(worker, "order.fulfill", fulfill)
//	err = worker.Run(ctx) // until ctx is canceled or Stop is called; then drains
type Worker struct {
	s        settings
	db       DB
	pool     workerPool
	handlers map[string]*handler

	mu      sync.Mutex
	running map[string]*run
	lanes   []*lane

	state    atomic.Int32
	claiming atomic.Bool
	draining atomic.Bool
	// registrySecret binds the worker's registry row to it: report_worker_v2 returns it at
	// registration, and later reports and the unregistering present it (nil before that).
	registrySecret atomic.Pointer[string]
	// reportNow asks the registration for a report at once (the last held job of a draining
	// worker finished).
	reportNow  chan struct{}
	idleRounds atomic.Int32
	// base is the parent of every handler's context: Run's context without its cancellation
	// (a canceled Run drains; it does not cancel running handlers).
	base context.Context
	// tracer records the attempts' spans; nil without a tracer provider (see attemptTracer).
	tracer   trace.Tracer
	stopCh   chan context.Context
	stopped  chan struct{}
	quit     chan struct{}
	pumps    sync.WaitGroup
	services sync.WaitGroup
}

const (
	stateIdle int32 = iota
	stateRunning
	stateStopping
	stateStopped
)

// NewWorker checks the options and returns a worker on db, which must be a pool
// (workhorse.Pgx(*pgxpool.Pool) or workhorse.SQL(*sql.DB)). Register handlers with [Handle],
// then call Run.
func NewWorker(db DB, o WorkerOptions) (*Worker, error) {
	s, err := checkWorkerOptions(o)
	if err != nil {
		return nil, err
	}
	pool := db.asPool()
	if pool == nil {
		return nil, invalid("db", "a worker needs a pool (*pgxpool.Pool or *sql.DB), not a transaction or a single connection")
	}
	w := &Worker{
		s: s, db: pool.db(), pool: pool, handlers: map[string]*handler{}, running: map[string]*run{},
		stopCh: make(chan context.Context, 1), stopped: make(chan struct{}), quit: make(chan struct{}),
		reportNow: make(chan struct{}, 1),
	}
	for i := 0; i < s.roundTrips; i++ {
		slots := s.concurrency / s.roundTrips
		if i < s.concurrency%s.roundTrips {
			slots++
		}
		w.lanes = append(w.lanes, &lane{slots: slots, wake: make(chan struct{}, 1)})
	}
	return w, nil
}

// ID is the worker's id in leases and history.
func (w *Worker) ID() string { return w.s.workerID }

// Queues are the queues the worker claims from.
func (w *Worker) Queues() []string { return append([]string(nil), w.s.queues...) }

// Handle registers the handler of one job type. The payload is decoded from JSON into P, and
// the result R encoded as the job's result (JSON, at most 1 MiB; use struct{} or any(nil) for
// none). Returning an error fails the attempt, and the job's retry policy decides what next
// ([NonRetryable] and [RetryAfter] decide instead). Register every type before Run.
//
//	err := workhorse.Handle(worker, "email.send", func(ctx context.Context, job *workhorse.Job, p Email) (any, error) {
//		return nil, mailer.Send(ctx, p.To)
//	})
func Handle[P, R any](w *Worker, jobType string, fn func(ctx context.Context, job *Job, payload P) (R, error), opts ...HandlerOptions) error {
	if fn == nil {
		return invalid("handler", "must be a function")
	}
	erased := func(ctx context.Context, job *Job, raw []byte) ([]byte, error) {
		payload, err := decodePayload[P](job, raw)
		if err != nil {
			return nil, err
		}
		result, err := fn(ctx, job, payload)
		if err != nil {
			return nil, err
		}
		return toJSON(result, "result", maxJSONBytes)
	}
	return w.register(jobType, &handler{fn: erased}, opts)
}

func (w *Worker) register(jobType string, h *handler, opts []HandlerOptions) error {
	if err := checkName(jobType, "type"); err != nil {
		return err
	}
	if len(opts) > 1 {
		return invalid("options", "give at most one HandlerOptions")
	}
	if len(opts) == 1 && opts[0].Retry != nil {
		policy, err := opts[0].Retry.wire("retry")
		if err == nil {
			err = opts[0].Retry.checkRanges("retry")
		}
		if err != nil {
			return err
		}
		h.retry = policy
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state.Load() != stateIdle {
		return &WorkerStateError{Message: "register handlers before Run"}
	}
	if w.handlers[jobType] != nil {
		return &WorkerStateError{Message: fmt.Sprintf("a handler for job type %q is already registered", jobType)}
	}
	w.handlers[jobType] = h
	return nil
}

// Run verifies the schema, then claims and runs jobs until ctx is canceled or Stop is called,
// and drains: it stops claiming, lets running handlers finish for up to ShutdownTimeout,
// cancels the contexts of the rest (nothing is recorded for them; their leases expire and
// another worker runs them again), records the completions it holds and closes its own
// connections. A worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.state.CompareAndSwap(stateIdle, stateRunning) {
		return &WorkerStateError{Message: "this worker has already run"}
	}
	if err := VerifySchema(ctx, w.db); err != nil {
		w.state.Store(stateStopped)
		close(w.stopped)
		return err
	}
	w.base = context.WithoutCancel(ctx)
	w.tracer = attemptTracer(w.s.tracerProvider)
	services, stopServices := context.WithCancel(w.base)
	w.claiming.Store(true)
	w.startRegistration(services)
	w.startHeartbeater(services)
	if w.s.listen {
		w.startNotifier(services)
	}
	ticks, stopTicks := context.WithCancel(w.base)
	tickDone := w.startTicks(ticks)
	for _, l := range w.lanes {
		w.pumps.Add(1)
		go w.pump(l)
	}
	w.emit(Event{Name: EventWorkerStarted})
	w.wakeAll()

	var drain context.Context
	select {
	case <-ctx.Done():
		var cancel context.CancelFunc
		drain, cancel = context.WithCancel(context.Background())
		defer cancel()
	case drain = <-w.stopCh:
	}
	w.state.Store(stateStopping)
	w.claiming.Store(false)
	stopTicks()
	<-tickDone
	w.drain(drain)
	close(w.quit)
	w.pumps.Wait()
	stopServices()
	w.services.Wait()
	w.unregister()
	w.state.Store(stateStopped)
	w.emit(Event{Name: EventWorkerStopped})
	close(w.stopped)
	return nil
}

// Stop drains the worker as Run does when its context is canceled, and returns once Run has
// returned. Running handlers get until ctx is done or ShutdownTimeout has passed, whichever
// comes first; an already canceled ctx stops at once (their contexts are canceled, nothing is
// recorded for them).
func (w *Worker) Stop(ctx context.Context) error {
	if w.state.Load() == stateIdle {
		return nil
	}
	select {
	case w.stopCh <- ctx:
	default:
	}
	<-w.stopped
	return nil
}

// drain waits for the running handlers (until ctx is done or the shutdown timeout), abandons
// the rest, and waits until every completion the lanes hold is recorded.
func (w *Worker) drain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, w.s.shutdownTimeout)
	defer cancel()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for w.activeCount() > 0 && ctx.Err() == nil {
		select {
		case <-poll.C:
		case <-ctx.Done():
		}
	}
	if w.activeCount() > 0 {
		w.abandonAll()
	}
	for !w.flushed() {
		<-poll.C
	}
}

func (w *Worker) activeCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

// abandonAll gives up on the handlers still running at the end of a drain: their contexts are
// canceled with a *WorkerShutdownError and their slots no longer count.
func (w *Worker) abandonAll() {
	w.mu.Lock()
	runs := make([]*run, 0, len(w.running))
	for id, r := range w.running {
		runs = append(runs, r)
		delete(w.running, id)
	}
	w.mu.Unlock()
	for _, l := range w.lanes {
		l.mu.Lock()
		l.active = 0
		l.generation++
		l.mu.Unlock()
	}
	for _, r := range runs {
		r.setOutcome(outcomeAbandoned, true)
		r.renewing.Store(false)
		r.cancel(&WorkerShutdownError{JobID: r.job.ID})
		w.emit(w.jobEvent(EventJobAbandoned, r, true))
	}
}

func (w *Worker) flushed() bool {
	for _, l := range w.lanes {
		l.mu.Lock()
		busy := len(l.pending) > 0 || l.inFlight
		l.mu.Unlock()
		if busy {
			return false
		}
	}
	return true
}

// startTicks offers a maintenance tick (promotion, recovery, deadlines) at once and then about
// every Tick; one worker's tick works while the others' return at once (an advisory try-lock).
func (w *Worker) startTicks(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		timer := time.NewTimer(0)
		defer timer.Stop()
		registered := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			if !registered {
				err := w.registerHandlers(ctx)
				registered = err == nil
				if err != nil && ctx.Err() == nil {
					w.reportError("tick", err)
				}
			}
			var result []byte
			if err := queryRow(ctx, w.db, tickSQL, nil, &result); err != nil && ctx.Err() == nil {
				w.reportError("tick", err)
			}
			timer.Reset(jitter(w.s.tick, 0.8, 1.2))
		}
	}()
	return done
}

// registerHandlers tells the server the retry policy of each handler, for every queue the
// worker claims from (register_handlers_v1): the server applies it to the attempts it closes
// itself (an execution timeout, a lease that ran out), as the worker does for the failures it
// reports. Tried before each tick until it succeeds; the last registration of a queue and type wins.
func (w *Worker) registerHandlers(ctx context.Context) error {
	if len(w.handlers) == 0 {
		return nil
	}
	items := make([]byte, 0, 64*len(w.handlers))
	items = append(items, '[')
	for jobType, h := range w.handlers {
		if len(items) > 1 {
			items = append(items, ',')
		}
		name, _ := json.Marshal(jobType)
		items = append(items, `{"type":`...)
		items = append(items, name...)
		if h.retry != nil {
			items = append(items, `,"retryPolicy":`...)
			items = append(items, h.retry...)
		}
		items = append(items, '}')
	}
	items = append(items, ']')
	var count int64
	return queryRow(ctx, w.db, registerHandlersSQL, []any{w.s.workerID, w.s.queuesArray, string(items)}, &count)
}

func jitter(d time.Duration, low, high float64) time.Duration {
	return time.Duration(float64(d) * (low + rand.Float64()*(high-low)))
}

func (w *Worker) wakeAll() {
	for _, l := range w.lanes {
		l.wakeUp()
	}
}

func (w *Worker) emit(e Event) {
	if w.s.onEvent == nil {
		return
	}
	e.WorkerID = w.s.workerID
	w.s.onEvent(e)
}

func (w *Worker) reportError(during string, err error) {
	w.emit(Event{Name: EventWorkerError, During: during, Err: err})
}

func (w *Worker) jobEvent(name EventName, r *run, ended bool) Event {
	e := Event{Name: name, JobID: r.job.ID, Type: r.job.Type, Queue: r.job.Queue, Attempt: r.job.Attempt}
	if ended {
		e.Duration = time.Since(r.startedAt)
	}
	return e
}
