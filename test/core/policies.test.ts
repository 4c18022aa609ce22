/**
 * Job policies: deadlines (waiting or running, never retried), execution timeouts (local abort
 * and the server's own clock), and retry control (non-retryable errors, explicit delays,
 * per-handler policies versus the job's own and the default).
 */
import {
  ExecutionTimeoutError,
  NonRetryableError,
  RetryAfterError,
  Worker,
  WorkhorseValidationError,
  type ErrorEnvelope,
  type HandlerContext,
  type JsonValue,
  type RetryPolicy,
  type TimelineEntry,
  type WorkerEvent,
  type WorkerOptions,
} from '../../lib/core';
import { claim, claimOne } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

/** Rejects with the signal's reason once it aborts: a handler that hangs until told to stop. */
function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

interface OutcomeRow {
  state: string;
  final_attempt: number;
  error: ErrorEnvelope | null;
}

interface AttemptRow {
  attempt: number;
  outcome: string;
  error: ErrorEnvelope | null;
}

const { db, queue, admin } = useTestDatabase({
  afterEachTest: () => Promise.all(workers.splice(0).map((w) => w.stop())),
  beforeDrop: () => Promise.all(workers.splice(0).map((w) => w.stop())),
});
const workers: Worker[] = [];

/** A worker tracked for cleanup, with every event it emits recorded. */
function makeWorker(options: WorkerOptions): { worker: Worker; events: WorkerEvent[] } {
  const worker = new Worker(queue, { listen: false, pollMs: 50, tickMs: 100, ...options });
  const events: WorkerEvent[] = [];
  worker.on((event) => events.push(event));
  workers.push(worker);
  return { worker, events };
}

/** Starts `worker.run()` in the background; its failure surfaces in the test through the stop in afterEach. */
function start(worker: Worker): void {
  void worker.run().catch(() => undefined);
}

const eventsOf = (events: WorkerEvent[], jobId: string, name: WorkerEvent['name']) =>
  events.filter((e) => e.name === name && 'jobId' in e && e.jobId === jobId);

async function outcomeOf(jobId: string): Promise<OutcomeRow | undefined> {
  const { rows } = await db.pool.query<OutcomeRow>(
    'SELECT state, final_attempt, error FROM workhorse.job_outcome WHERE job_id = $1',
    [jobId],
  );
  return rows[0];
}

async function attemptsOf(jobId: string): Promise<AttemptRow[]> {
  const { rows } = await db.pool.query<AttemptRow>(
    'SELECT attempt, outcome, error FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
    [jobId],
  );
  return rows;
}

async function eventKinds(jobId: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ kind: string }>(
    'SELECT kind FROM workhorse.job_event WHERE job_id = $1 ORDER BY id',
    [jobId],
  );
  return rows.map((r) => r.kind);
}

async function timeline(jobId: string): Promise<TimelineEntry[]> {
  return (await admin.getJobTimeline(jobId, { limit: 1000 })).items;
}

async function retryEvents(jobId: string): Promise<TimelineEntry[]> {
  return (await timeline(jobId)).filter((e) => e.source === 'event' && e.kind === 'retry_scheduled');
}

/** Runs tick_v1 until the job has an outcome (the worker-less path of deadline enforcement). */
async function tickUntilFinished(jobId: string, timeoutMs: number): Promise<OutcomeRow> {
  return waitFor(
    async () => {
      await db.pool.query('SELECT workhorse.tick_v1()');
      return outcomeOf(jobId);
    },
    timeoutMs,
    `job ${jobId} to finish`,
  );
}

/** What every deadline failure must look like: failed, DeadlineExceeded, after `attempts` attempts. */
async function expectDeadlineFailure(jobId: string, attempts: number): Promise<void> {
  const outcome = await outcomeOf(jobId);
  expect(outcome).toMatchObject({ state: 'failed', final_attempt: attempts });
  expect(outcome?.error?.name).toBe('DeadlineExceeded');
  const snapshot = await admin.getJob(jobId);
  expect(snapshot).toMatchObject({ state: 'failed', currentAttempt: attempts });
  expect(snapshot?.error?.name).toBe('DeadlineExceeded');
  const kinds = await eventKinds(jobId);
  expect(kinds.filter((k) => k === 'claimed')).toHaveLength(attempts);
  expect(kinds).not.toContain('retry_scheduled');
  expect(kinds[kinds.length - 1]).toBe('failed');
}

describe('deadlines', () => {
  it('fails a ready job whose deadline passes before any worker claims it, and never runs it', async () => {
    const q = 'deadline-ready';
    const deadline = new Date(Date.now() + 1000);
    const id = await queue.enqueue('policy.noop', {}, { queue: q, deadline, maxAttempts: 5 });
    const before = await admin.getJob(id);
    expect(before).toMatchObject({ state: 'ready', deadline, executionTimeoutMs: null });

    const outcome = await tickUntilFinished(id, 5000);
    expect(outcome.state).toBe('failed');
    await expectDeadlineFailure(id, 0);
    // No attempt ran, so none was closed.
    expect(await attemptsOf(id)).toEqual([]);
    // Nothing is left to claim.
    expect(await claim(db.pool, q, { workerId: 'deadline-probe', limit: 10 })).toEqual([]);
    expect(await eventKinds(id)).toEqual(['enqueued', 'failed']);
  });

  it('fails a scheduled job whose deadline comes before its run time', async () => {
    const q = 'deadline-scheduled';
    const id = await queue.enqueue(
      'policy.noop',
      {},
      { queue: q, runAt: new Date(Date.now() + 60_000), deadline: new Date(Date.now() + 1000) },
    );
    expect((await admin.getJob(id))?.state).toBe('scheduled');

    await tickUntilFinished(id, 5000);
    await expectDeadlineFailure(id, 0);
    expect(await attemptsOf(id)).toEqual([]);
    expect(await claim(db.pool, q, { workerId: 'deadline-probe', limit: 10 })).toEqual([]);
  });

  it('fails a running job at its deadline, closes the attempt as `deadline`, and refuses the late completion', async () => {
    const q = 'deadline-active';
    // A long lease (and so a 20 s heartbeat) keeps the worker unaware: only the server's clock ends the job.
    const { worker, events } = makeWorker({ queues: [q], leaseMs: 60_000 });
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let calls = 0;
    let claimed = false;
    worker.handle('policy.hang', async (_payload: unknown, ctx: HandlerContext) => {
      calls++;
      claimed = true;
      await Promise.race([released, untilAborted(ctx.signal)]);
      return { finished: true };
    });
    const id = await queue.enqueue('policy.hang', {}, { queue: q, deadline: new Date(Date.now() + 2000), maxAttempts: 5 });
    start(worker);
    await waitFor(async () => claimed, 5000, 'the handler to start');
    expect((await admin.getJob(id))?.state).toBe('active');

    // The worker's own maintenance tick enforces the deadline.
    await waitFor(() => outcomeOf(id), 5000, 'the deadline to fail the job');
    await expectDeadlineFailure(id, 1);
    const attempts = await attemptsOf(id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ attempt: 1, outcome: 'deadline' });
    expect(attempts[0].error?.name).toBe('DeadlineExceeded');

    release();
    await waitFor(async () => eventsOf(events, id, 'job.lease_lost').length > 0, 5000, 'job.lease_lost');
    expect(eventsOf(events, id, 'job.succeeded')).toEqual([]);
    // The stale completion wrote nothing: the outcome is still the deadline failure.
    await expectDeadlineFailure(id, 1);
    expect(await attemptsOf(id)).toHaveLength(1);
    expect(calls).toBe(1);
    expect(eventsOf(events, id, 'job.claimed')).toHaveLength(1);
  });

  it('never claims a ready job that is past its deadline, even before maintenance fails it', async () => {
    const q = 'deadline-claim';
    const id = await queue.enqueue('policy.noop', {}, { queue: q, deadline: new Date(Date.now() + 3_600_000) });
    // Moving the deadline into the past by hand stands for a deadline that passed between two ticks.
    await db.pool.query(
      "UPDATE workhorse.job_runtime SET deadline = clock_timestamp() - interval '1 second' WHERE job_id = $1",
      [id],
    );
    expect(await claim(db.pool, q, { workerId: 'deadline-claimer', limit: 10 })).toEqual([]);
    expect((await admin.getJob(id))?.state).toBe('ready');
    expect(await eventKinds(id)).toEqual(['enqueued']);

    const expired = await db.pool.query<{ n: number }>('SELECT workhorse.expire_deadlines_v1(1000) AS n');
    expect(expired.rows[0].n).toBeGreaterThanOrEqual(1);
    await expectDeadlineFailure(id, 0);
  });

  it('fails for good at once when the next retry would start after the deadline', async () => {
    const q = 'deadline-retry';
    const { worker, events } = makeWorker({ queues: [q], concurrency: 2 });
    worker.handle('policy.flaky', async () => {
      throw new Error('upstream down');
    });
    const deadline = new Date(Date.now() + 30_000);
    // Same deadline, two policies: a 60 s retry cannot start in time, a 100 ms retry can.
    const late = await queue.enqueue('policy.flaky', {}, { queue: q, deadline, maxAttempts: 5, retryPolicy: { kind: 'fixed', delayMs: 60_000 } });
    const soon = await queue.enqueue('policy.flaky', {}, { queue: q, deadline, maxAttempts: 5, retryPolicy: { kind: 'fixed', delayMs: 100 } });
    expect(await worker.runOnce()).toBe(2);

    const outcome = await outcomeOf(late);
    expect(outcome).toMatchObject({ state: 'failed', final_attempt: 1 });
    // The handler's own error is kept: the deadline has not passed yet, it only ruled out a retry.
    expect(outcome?.error).toMatchObject({ name: 'Error', message: 'upstream down' });
    expect((await attemptsOf(late)).map((a) => a.outcome)).toEqual(['failed']);
    expect(eventsOf(events, late, 'job.failed')).toHaveLength(1);
    expect(eventsOf(events, late, 'job.retry_scheduled')).toEqual([]);

    expect(await outcomeOf(soon)).toBeUndefined();
    expect((await admin.getJob(soon))?.state).toMatch(/^(scheduled|ready)$/);
    expect(eventsOf(events, soon, 'job.retry_scheduled')).toHaveLength(1);
  });
});

describe('execution timeout', () => {
  /** A worker whose handler waits on its signal on attempt 1 (rethrowing the reason) and returns at once after. */
  function slowThenFast(q: string, retry?: RetryPolicy, options: WorkerOptions = {}) {
    const made = makeWorker({ queues: [q], leaseMs: 60_000, ...options });
    const reasons: unknown[] = [];
    made.worker.handle(
      'policy.slow-then-fast',
      async (_payload: unknown, ctx: HandlerContext) => {
        if (ctx.attempt === 1) {
          try {
            await untilAborted(ctx.signal);
          } catch (reason) {
            reasons.push(reason);
            throw reason;
          }
        }
        return { attempt: ctx.attempt };
      },
      retry ? { retry } : {},
    );
    return { ...made, reasons };
  }

  it('aborts the handler with ExecutionTimeoutError, closes the attempt as `timeout`, and the next attempt succeeds', async () => {
    const q = 'timeout-worker';
    const { worker, events, reasons } = slowThenFast(q);
    const id = await queue.enqueue(
      'policy.slow-then-fast',
      {},
      { queue: q, executionTimeoutMs: 1000, maxAttempts: 3, retryPolicy: { kind: 'fixed', delayMs: 100 } },
    );
    expect((await admin.getJob(id))?.executionTimeoutMs).toBe(1000);
    start(worker);

    const outcome = await waitFor(() => outcomeOf(id), 10_000, 'the job to finish');
    expect(outcome).toMatchObject({ state: 'succeeded', final_attempt: 2 });
    expect((await admin.getJob(id))?.result).toEqual({ attempt: 2 });

    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toBeInstanceOf(ExecutionTimeoutError);
    expect(reasons[0]).toMatchObject({ jobId: id, timeoutMs: 1000 });

    const attempts = await attemptsOf(id);
    expect(attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'timeout'],
      [2, 'succeeded'],
    ]);
    // Whoever closed attempt 1 (the worker's fail_v1 or recovery), it was closed once, as a
    // timeout, and the job's own 100 ms policy set the delay.
    const closings = (await timeline(id)).filter(
      (e) => e.source === 'event' && (e.kind === 'retry_scheduled' || e.kind === 'timed_out'),
    );
    expect(closings).toHaveLength(1);
    expect(closings[0].data).toMatchObject({ delayMs: 100 });
    if (closings[0].kind === 'retry_scheduled') expect(closings[0].data).toMatchObject({ attemptOutcome: 'timeout', delaySource: 'job' });
    expect(eventsOf(events, id, 'job.claimed')).toHaveLength(2);
    expect(eventsOf(events, id, 'job.succeeded')).toHaveLength(1);
  });

  // The worker aborts at the execution timeout, so its report arrives just after the server's
  // attempt deadline; the owner may still record its own timed-out attempt while its lease holds.
  // (Maintenance would close it too once the deadline passed, with the same policy: this worker
  // ticks only when it starts, so that the report under test is not raced by a tick; the retry
  // is due at once, so no promotion is needed.)
  it('records the timeout through the worker itself: retry_scheduled with attemptOutcome `timeout` and the handler policy', async () => {
    const q = 'timeout-worker-handler-policy';
    const { worker, events } = slowThenFast(q, { kind: 'fixed', delayMs: 0 }, { tickMs: 600_000 });
    const id = await queue.enqueue('policy.slow-then-fast', {}, { queue: q, executionTimeoutMs: 1000, maxAttempts: 3 });
    start(worker);

    const outcome = await waitFor(() => outcomeOf(id), 10_000, 'the job to finish');
    expect(outcome).toMatchObject({ state: 'succeeded', final_attempt: 2 });

    const attempts = await attemptsOf(id);
    expect(attempts[0]).toMatchObject({ attempt: 1, outcome: 'timeout' });
    expect(attempts[0].error?.name).toBe('ExecutionTimeoutError');
    const retries = await retryEvents(id);
    expect(retries).toHaveLength(1);
    expect(retries[0].data).toMatchObject({ attemptOutcome: 'timeout', delaySource: 'handler', delayMs: 0 });
    expect(eventsOf(events, id, 'job.retry_scheduled')).toHaveLength(1);
    expect(eventsOf(events, id, 'job.retry_scheduled')[0]).toMatchObject({ attempt: 1, delayMs: 0 });
    expect(eventsOf(events, id, 'job.lease_lost')).toEqual([]);
  });

  it('fail_v1 with attemptOutcome `timeout` closes the attempt as `timeout` and applies the handler policy', async () => {
    const q = 'timeout-protocol';
    const workerId = 'timeout-protocol-worker';
    const id = await queue.enqueue('policy.noop', {}, { queue: q, executionTimeoutMs: 60_000, maxAttempts: 3 });
    const job = await claimOne(db.pool, q, { workerId });
    const { rows } = await db.pool.query<{ status: string; delay_ms: string; delay_source: string }>(
      'SELECT status, delay_ms, delay_source FROM workhorse.fail_v1($1, $2, $3, $4::jsonb, $5::jsonb)',
      [
        id,
        workerId,
        job.fence,
        JSON.stringify({ name: 'ExecutionTimeoutError', message: 'too slow' }),
        JSON.stringify({ attemptOutcome: 'timeout', retryPolicy: { kind: 'fixed', delayMs: 250 } }),
      ],
    );
    expect(rows[0]).toMatchObject({ status: 'retry_scheduled', delay_source: 'handler' });
    expect(Number(rows[0].delay_ms)).toBe(250);
    expect(await attemptsOf(id)).toEqual([{ attempt: 1, outcome: 'timeout', error: { name: 'ExecutionTimeoutError', message: 'too slow' } }]);
    const [retry] = await retryEvents(id);
    expect(retry.data).toMatchObject({ attemptOutcome: 'timeout', delaySource: 'handler', delayMs: 250, state: 'scheduled' });
  });

  it('is enforced by the server clock: owner writes go stale and recovery closes the attempt as `timeout`', async () => {
    const q = 'timeout-server';
    const workerId = 'timeout-server-worker';
    const id = await queue.enqueue(
      'policy.noop',
      {},
      { queue: q, executionTimeoutMs: 1000, maxAttempts: 3, retryPolicy: { kind: 'fixed', delayMs: 400 } },
    );
    const job = await claimOne(db.pool, q, { workerId });
    expect(job).toMatchObject({ jobId: id, attempt: 1, executionTimeoutMs: 1000 });

    // Within the timeout the lease is owned.
    const early = await db.pool.query<{ status: string }>(
      'SELECT status FROM workhorse.heartbeat_many_v1($1, $2::jsonb, 60000)',
      [workerId, JSON.stringify([{ jobId: id, fence: Number(job.fence) }])],
    );
    expect(early.rows.map((r) => r.status)).toEqual(['accepted']);

    await waitFor(
      async () => {
        const { rows } = await db.pool.query<{ passed: boolean }>(
          'SELECT attempt_deadline <= clock_timestamp() AS passed FROM workhorse.job_runtime WHERE job_id = $1',
          [id],
        );
        return rows[0]?.passed;
      },
      5000,
      'the attempt deadline to pass on the server clock',
    );

    // The lease itself still has about a minute left; the execution timeout alone makes these stale.
    const beat = await db.pool.query<{ status: string }>(
      'SELECT status FROM workhorse.heartbeat_many_v1($1, $2::jsonb, 60000)',
      [workerId, JSON.stringify([{ jobId: id, fence: Number(job.fence) }])],
    );
    expect(beat.rows.map((r) => r.status)).toEqual(['stale']);
    const completed = await db.pool.query<{ status: string }>(
      'SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status',
      [id, workerId, job.fence, '{"late":true}'],
    );
    expect(completed.rows[0].status).toBe('stale');
    expect(await outcomeOf(id)).toBeUndefined();

    const recovered = await db.pool.query<{ n: number }>('SELECT workhorse.recover_expired_v1(1000) AS n');
    expect(recovered.rows[0].n).toBe(1);
    const attempts = await attemptsOf(id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ attempt: 1, outcome: 'timeout' });
    expect(attempts[0].error?.name).toBe('ExecutionTimeout');

    const timedOut = (await timeline(id)).filter((e) => e.source === 'event' && e.kind === 'timed_out');
    expect(timedOut).toHaveLength(1);
    // The job's own policy sets the delay before the next attempt.
    expect(timedOut[0].data).toMatchObject({ delayMs: 400, state: 'scheduled' });
    const snapshot = await admin.getJob(id);
    expect(snapshot).toMatchObject({ state: 'scheduled', currentAttempt: 1, workerId: null });
    expect(snapshot?.error?.name).toBe('ExecutionTimeout');
  });
});

describe('retry control', () => {
  class PlainFatal extends Error {
    override name = 'PlainFatal';
    readonly retryable = false;
  }
  class PlainThrottled extends Error {
    override name = 'PlainThrottled';
    readonly retryDelayMs = 1500;
  }

  it.each([
    ['NonRetryableError', 'nonretry-class', () => new NonRetryableError('account gone')],
    ['an error with retryable = false', 'nonretry-flag', () => new PlainFatal('account gone')],
  ])('fails at once with attempts left: %s', async (_label, q, make) => {
    const { worker, events } = makeWorker({ queues: [q] });
    worker.handle('policy.fatal', async () => {
      throw make();
    });
    const id = await queue.enqueue('policy.fatal', {}, { queue: q, maxAttempts: 5, retryPolicy: { kind: 'fixed', delayMs: 0 } });
    expect(await worker.runOnce()).toBe(1);

    const outcome = await outcomeOf(id);
    expect(outcome).toMatchObject({ state: 'failed', final_attempt: 1 });
    expect(outcome?.error).toMatchObject({ name: make().name, message: 'account gone' });
    expect((await attemptsOf(id)).map((a) => a.outcome)).toEqual(['failed']);
    expect(await retryEvents(id)).toEqual([]);
    expect(eventsOf(events, id, 'job.failed')).toHaveLength(1);
    expect(eventsOf(events, id, 'job.retry_scheduled')).toEqual([]);
  });

  it.each([
    ['RetryAfterError', 'explicit-class', () => new RetryAfterError('rate limited', 1500)],
    ['an error with numeric retryDelayMs', 'explicit-field', () => new PlainThrottled('rate limited')],
  ])('schedules the retry at the explicit delay: %s', async (_label, q, make) => {
    const { worker, events } = makeWorker({ queues: [q] });
    worker.handle('policy.throttled', async () => {
      throw make();
    });
    // The job's own policy says 50 ms; the explicit delay wins over it.
    const id = await queue.enqueue('policy.throttled', {}, { queue: q, maxAttempts: 5, retryPolicy: { kind: 'fixed', delayMs: 50 } });
    expect(await worker.runOnce()).toBe(1);

    const retries = await retryEvents(id);
    expect(retries).toHaveLength(1);
    expect(retries[0].data).toMatchObject({ delaySource: 'explicit', delayMs: 1500, state: 'scheduled', attemptOutcome: 'failed' });
    const runAt = new Date(String(retries[0].data?.runAt));
    expect(runAt.getTime() - retries[0].at.getTime()).toBe(1500);

    const [event] = eventsOf(events, id, 'job.retry_scheduled');
    expect(event).toMatchObject({ delayMs: 1500 });
    const snapshot = await admin.getJob(id);
    expect(snapshot).toMatchObject({ state: 'scheduled', currentAttempt: 1 });
    expect(snapshot?.runAt.getTime()).toBe(runAt.getTime());
    expect(snapshot?.error?.name).toBe(make().name);
  });

  it('applies the handler policy to jobs without their own, and the job policy wins over it', async () => {
    const q = 'handler-policy';
    const { worker } = makeWorker({ queues: [q], concurrency: 3 });
    worker.handle(
      'policy.handler-retry',
      async () => {
        throw new Error('try again');
      },
      { retry: { kind: 'fixed', delayMs: 300 } },
    );
    const [plain, own] = await queue.enqueueMany([
      { type: 'policy.handler-retry', payload: {}, queue: q, maxAttempts: 3 },
      { type: 'policy.handler-retry', payload: {}, queue: q, maxAttempts: 3, retryPolicy: { kind: 'fixed', delayMs: 700 } },
    ]);
    expect(await worker.runOnce()).toBe(2);

    const [plainRetry] = await retryEvents(plain);
    expect(plainRetry?.data).toMatchObject({ delaySource: 'handler', delayMs: 300 });
    const [ownRetry] = await retryEvents(own);
    expect(ownRetry?.data).toMatchObject({ delaySource: 'job', delayMs: 700 });

    // The handler's policy belongs to the worker, not the job: the job still reports none.
    expect((await admin.getJob(plain))?.retryPolicy).toBeNull();
    expect((await admin.getJob(own))?.retryPolicy).toEqual({ kind: 'fixed', delayMs: 700 });
  });

  it('falls back to the default policy: exponential with jitter, 500..1000 ms after attempt 1', async () => {
    const q = 'default-policy';
    const { worker } = makeWorker({ queues: [q], concurrency: 5 });
    worker.handle('policy.default-retry', async () => {
      throw new Error('try again');
    });
    const ids = await queue.enqueueMany(
      Array.from({ length: 5 }, () => ({ type: 'policy.default-retry', payload: {}, queue: q, maxAttempts: 3 })),
    );
    expect(await worker.runOnce()).toBe(5);

    const delays: number[] = [];
    for (const id of ids) {
      const [retry] = await retryEvents(id);
      expect(retry?.data).toMatchObject({ delaySource: 'default', state: 'scheduled' });
      delays.push(Number(retry?.data?.delayMs));
    }
    for (const d of delays) {
      expect(d).toBeGreaterThanOrEqual(500);
      expect(d).toBeLessThanOrEqual(1000);
    }
  });

  it('refuses invalid handler retry options with WorkhorseValidationError naming the field', () => {
    const worker = new Worker(queue, { queues: ['never-run'] });
    const handler = async (): Promise<JsonValue> => null;
    const bad: [unknown, string][] = [
      ['fast', 'retry'],
      [null, 'retry'],
      [{ kind: 'linear' }, 'retry.kind'],
      [{ kind: 'fixed', delayMs: -1 }, 'retry.delayMs'],
      [{ kind: 'fixed', delayMs: 1.5 }, 'retry.delayMs'],
      [{ kind: 'fixed', initialMs: 100 }, 'retry.initialMs'],
      [{ kind: 'exponential', multiplier: 11 }, 'retry.multiplier'],
      [{ kind: 'exponential', jitter: 'yes' }, 'retry.jitter'],
      [{ kind: 'exponential', initialMs: 5000, maxMs: 1000 }, 'retry.maxMs'],
    ];
    for (const [retry, field] of bad) {
      let caught: unknown;
      try {
        worker.handle('policy.invalid', handler, { retry: retry as RetryPolicy });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(WorkhorseValidationError);
      expect((caught as WorkhorseValidationError).field).toBe(field);
    }
    // None of the refused calls registered the handler.
    expect(worker.types).toEqual([]);
    worker.handle('policy.invalid', handler, { retry: { kind: 'exponential', initialMs: 10, maxMs: 10 } });
    expect(worker.types).toEqual(['policy.invalid']);
  });

  it('reports the job retry policy: null when none was given, normalised otherwise', async () => {
    const [none, fixed, fixedDefault, exponential] = await queue.enqueueMany([
      { type: 'policy.noop', payload: {}, queue: 'policy-snapshot' },
      { type: 'policy.noop', payload: {}, queue: 'policy-snapshot', retryPolicy: { kind: 'fixed', delayMs: 700 } },
      { type: 'policy.noop', payload: {}, queue: 'policy-snapshot', retryPolicy: { kind: 'fixed' } },
      { type: 'policy.noop', payload: {}, queue: 'policy-snapshot', retryPolicy: { kind: 'exponential', initialMs: 200 } },
    ]);
    expect((await admin.getJob(none))?.retryPolicy).toBeNull();
    expect((await admin.getJob(fixed))?.retryPolicy).toEqual({ kind: 'fixed', delayMs: 700 });
    expect((await admin.getJob(fixedDefault))?.retryPolicy).toEqual({ kind: 'fixed', delayMs: 1000 });
    expect((await admin.getJob(exponential))?.retryPolicy).toEqual({
      kind: 'exponential',
      initialMs: 200,
      multiplier: 2,
      maxMs: 3_600_000,
      jitter: true,
    });
    const listed = await admin.listJobs({ queue: 'policy-snapshot' });
    expect(listed.items.find((j) => j.id === none)?.retryPolicy).toBeNull();
    expect(listed.items.find((j) => j.id === fixed)?.retryPolicy).toEqual({ kind: 'fixed', delayMs: 700 });
  });
});
