package workhorse

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Job is what a handler gets besides its payload: who the job is, and its durable
// checkpoints ([Checkpoint]), sleeps and progress. The handler's context is canceled, with a
// cause that says why (context.Cause), when the job is canceled (*JobCanceledError), the lease
// is lost (*LeaseLostError), the attempt times out (*ExecutionTimeoutError) or the worker
// shuts down (*WorkerShutdownError).
type Job struct {
	ID    string
	Queue string
	Type  string
	// Attempt is this attempt's number, from 1.
	Attempt     int
	MaxAttempts int
	WorkerID    string
	// FenceToken is this claim's fence: every write for the job carries it, and a write with
	// an older fence is refused.
	FenceToken int64

	w   *Worker
	run *run
	// tx is a transactional handler's transaction (HandleTx), where its checkpoints are written; nil otherwise.
	tx *HandlerTx

	mu sync.Mutex
	// Stored by earlier runs, as claimed: {"name": [] | [value]} and the sleeps, {"name": wake time}
	// (the claim's waits column: durable sleeps, never signal or human waits).
	checkpointsJSON []byte
	sleepsJSON      []byte
	checkpoints     map[string]json.RawMessage // decoded on first use; value nil for []
	sleeps          map[string]time.Time
	// signalWaits counts the waits for each signal name this run reached (the n-th is wait n on
	// every replay).
	signalWaits map[string]int
}

// Checkpoint runs fn once per job: its result is stored under name, and when the handler runs
// again (after a crash, a retry or a durable sleep) the stored result is returned instead of
// running fn again. The result must encode as JSON (at most 1 MiB). A *LeaseLostError means
// this worker no longer owns the job.
//
//	charge, err := workhorse.Checkpoint(ctx, job, "charge", func(ctx context.Context) (Charge, error) {
//		return payments.Charge(ctx, order.ID, "order:"+order.ID+":charge")
//	})
func Checkpoint[T any](ctx context.Context, job *Job, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var value T
	// (Checked before fn runs, which save_checkpoint_v2 would refuse to store.)
	if n := int64(len([]rune(name))); n < limits.Handler.NameLength.Min || n > limits.Handler.NameLength.Max {
		return value, invalid("name", "must be a string of %d to %d characters", limits.Handler.NameLength.Min, limits.Handler.NameLength.Max)
	}
	if err := checkText(name, "name"); err != nil {
		return value, err
	}
	stored, found, err := job.checkpoint(name)
	if err != nil {
		return value, err
	}
	if found {
		if stored != nil {
			err = json.Unmarshal(stored, &value)
		}
		return value, err
	}
	if ctx.Err() != nil {
		return value, context.Cause(ctx)
	}
	if value, err = fn(ctx); err != nil {
		return value, err
	}
	data, err := toJSON(value, `checkpoint "`+name+`"`, maxJSONBytes)
	if err != nil {
		return value, err
	}
	// What is stored is what the checkpoint answers: this value, or on `exists` the one another
	// save stored first.
	if stored, err = job.saveCheckpoint(ctx, name, data); err != nil {
		return value, err
	}
	var answer T
	if stored != nil {
		err = json.Unmarshal(stored, &answer)
	}
	return answer, err
}

func (j *Job) checkpoint(name string) (json.RawMessage, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.checkpoints == nil && j.checkpointsJSON != nil {
		var wrapped map[string][]json.RawMessage
		if err := json.Unmarshal(j.checkpointsJSON, &wrapped); err != nil {
			return nil, false, err
		}
		j.checkpoints = make(map[string]json.RawMessage, len(wrapped))
		for k, v := range wrapped {
			if len(v) == 1 {
				j.checkpoints[k] = v[0]
			} else {
				j.checkpoints[k] = nil // a stage that returned nothing (TypeScript's undefined)
			}
		}
	}
	value, found := j.checkpoints[name]
	return value, found, nil
}

// fenced answers an owner write's status: `stale` means this worker no longer owns the job,
// which it then gives up (the handler's context is canceled with a *LeaseLostError).
func (j *Job) fenced(s string, err error) error {
	if err == nil && s == "stale" {
		j.w.loseLease(j.run)
		return &LeaseLostError{JobID: j.ID}
	}
	return err
}

// saveCheckpoint saves data under name and returns the value now stored there (nil for a stage
// that returned nothing): data, or on `exists` the value another save stored first, which
// save_checkpoint_v2 answers with the status.
func (j *Job) saveCheckpoint(ctx context.Context, name string, data []byte) (json.RawMessage, error) {
	var s string
	var stored *string
	// In a transactional handler the checkpoint is part of its transaction, which then reads the
	// job's row without locking it (the completion locks it): progress, sleeps and waits, which
	// commit on their own, are not held up.
	db := j.w.db
	if j.tx != nil {
		db = j.tx.DB()
	}
	err := queryRow(context.WithoutCancel(ctx), db,
		saveCheckpointSQL,
		[]any{j.ID, j.WorkerID, j.FenceToken, name, string(data), j.tx != nil}, &s, &stored)
	if err == nil && stored == nil {
		s = "stale"
	}
	if err = j.fenced(s, err); err != nil {
		return nil, err
	}
	var entry []json.RawMessage
	if err := json.Unmarshal([]byte(*stored), &entry); err != nil {
		return nil, err
	}
	var value json.RawMessage
	if len(entry) == 1 {
		value = entry[0]
	}
	j.mu.Lock()
	if j.checkpoints == nil {
		j.checkpoints = map[string]json.RawMessage{}
	}
	j.checkpoints[name] = value
	j.mu.Unlock()
	return value, nil
}

// SetProgress reports progress (any JSON, at most 64 KiB), visible in Admin.GetJob's Progress
// and kept when the job ends. Each call replaces the last value.
func (j *Job) SetProgress(ctx context.Context, value any) error {
	data, err := toJSON(value, "progress", maxProgressLen)
	if err != nil {
		return err
	}
	return j.fenced(status(context.WithoutCancel(ctx), j.w.db, setProgressSQL,
		j.ID, j.WorkerID, j.FenceToken, string(data)))
}

// Sleep is a durable sleep: the job is set aside until d after the first time it reached the
// sleep named name, without holding a worker slot or consuming an attempt, and the handler then
// runs again from the top (completed checkpoints replay, and this sleep returns nil at once).
// It returns nil when the wake time has passed; otherwise a *JobSleepingError, which the
// handler must return.
//
//	if err := job.Sleep(ctx, "wait-a-day", 24*time.Hour); err != nil {
//		return nil, err
//	}
func (j *Job) Sleep(ctx context.Context, name string, d time.Duration) error {
	// (The range is sleep_v1's to check: limits.json handler.sleepMs.)
	ms, err := millis(d, "ms")
	if err != nil {
		return err
	}
	return j.sleep(ctx, name, nil, ms)
}

// SleepUntil is Sleep until a point in time.
func (j *Job) SleepUntil(ctx context.Context, name string, until time.Time) error {
	text, err := checkTime(until, "until")
	if err != nil {
		return err
	}
	return j.sleep(ctx, name, text, nil)
}

func (j *Job) sleep(ctx context.Context, name string, until, ms any) error {
	// (Its length is sleep_v1's to check.)
	if err := checkText(name, "name"); err != nil {
		return err
	}
	known, err := j.sleepWakeAt(name)
	if err != nil {
		return err
	}
	if !known.IsZero() && !known.After(time.Now()) {
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var s string
	var wakeAt time.Time
	err = queryRow(context.WithoutCancel(ctx), j.w.db, sleepSQL,
		[]any{j.ID, j.WorkerID, j.FenceToken, name, until, ms}, &s, &wakeAt)
	if err := j.fenced(s, err); err != nil {
		return err
	}
	j.mu.Lock()
	j.sleeps[name] = wakeAt
	j.mu.Unlock()
	if s == "elapsed" {
		return nil
	}
	// `sleeping` or `canceled`: either way the job is no longer this worker's to run.
	j.w.sleepRun(j.run, wakeAt)
	return &JobSleepingError{JobID: j.ID, WakeAt: wakeAt}
}

func (j *Job) sleepWakeAt(name string) (time.Time, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.sleeps == nil {
		j.sleeps = map[string]time.Time{}
		if j.sleepsJSON != nil {
			if err := json.Unmarshal(j.sleepsJSON, &j.sleeps); err != nil {
				return time.Time{}, err
			}
		}
	}
	return j.sleeps[name], nil
}
