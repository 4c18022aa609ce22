/**
 * Retries: the persisted backoff policy, the attempt budget, the stored error envelope, delayed
 * jobs that must not run early, and the explicit options of fail_v1.
 */
import { Worker, type ErrorEnvelope, type WorkerEvent } from '../../lib/core';
import { claim, claimOne, fail } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const WORKER = 'retry-test-worker';

interface AttemptRow {
  attempt: number;
  outcome: string;
  worker_id: string;
  fence_token: string;
  error: ErrorEnvelope | null;
}

interface RetryEventRow {
  attempt: number;
  delay_ms: number;
  delay_source: string;
  state: string;
  /** runAt in the event data minus the event's own time, in ms. */
  scheduled_after_ms: string;
  error: ErrorEnvelope;
}

class PaymentDeclined extends Error {
  override name = 'PaymentDeclined';
}

const { db, queue, admin } = useTestDatabase();

async function attempts(id: string): Promise<AttemptRow[]> {
  const { rows } = await db.pool.query<AttemptRow>(
    'SELECT attempt, outcome, worker_id, fence_token, error FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
    [id],
  );
  return rows;
}

async function retryEvents(id: string): Promise<RetryEventRow[]> {
  const { rows } = await db.pool.query<RetryEventRow>(
    `SELECT attempt, (data ->> 'delayMs')::int AS delay_ms, data ->> 'delaySource' AS delay_source, data ->> 'state' AS state,
            extract(epoch FROM (data ->> 'runAt')::timestamptz - at) * 1000 AS scheduled_after_ms, data -> 'error' AS error
     FROM workhorse.job_event WHERE job_id = $1 AND kind = 'retry_scheduled' ORDER BY id`,
    [id],
  );
  return rows;
}

/** Runs a worker until `done` holds, then stops it, whatever happens. */
async function runWorker(worker: Worker, done: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const running = worker.run();
  try {
    await waitFor(done, timeoutMs, what);
  } finally {
    await worker.stop();
    await running;
  }
}

async function hasOutcome(id: string): Promise<boolean> {
  return (await db.pool.query('SELECT 1 FROM workhorse.job_outcome WHERE job_id = $1', [id])).rowCount === 1;
}

describe('retry until maxAttempts', () => {
  it('retries a failing handler with the fixed policy, then fails with the last error envelope', async () => {
    const q = 'retry-fixed';
    const id = await queue.enqueue('always.throws', { order: 7 }, { queue: q, maxAttempts: 3, retryPolicy: { kind: 'fixed', delayMs: 200 } });

    const calls: number[] = [];
    const events: WorkerEvent[] = [];
    const worker = new Worker(queue, { queues: [q], concurrency: 1, pollMs: 20, tickMs: 20, workerId: 'fixed-worker' }).handle(
      'always.throws',
      async (_payload: unknown, ctx) => {
        calls.push(ctx.attempt);
        throw new PaymentDeclined(`declined on attempt ${ctx.attempt}`);
      },
    );
    worker.on((event) => events.push(event));
    await runWorker(worker, () => hasOutcome(id), 'the job to end');

    expect(calls).toEqual([1, 2, 3]);

    const job = await admin.getJob(id);
    expect(job).toMatchObject({ state: 'failed', currentAttempt: 3, maxAttempts: 3, result: null });
    expect(job?.error).toEqual({ name: 'PaymentDeclined', message: 'declined on attempt 3', stack: expect.any(String) });
    expect(job?.error?.stack).toContain('declined on attempt 3');

    const history = await attempts(id);
    expect(history.map((a) => [a.attempt, a.outcome, a.worker_id])).toEqual([
      [1, 'failed', 'fixed-worker'],
      [2, 'failed', 'fixed-worker'],
      [3, 'failed', 'fixed-worker'],
    ]);
    expect(history.map((a) => a.error?.message)).toEqual(['declined on attempt 1', 'declined on attempt 2', 'declined on attempt 3']);
    expect(history.every((a) => a.error?.name === 'PaymentDeclined' && typeof a.error.stack === 'string')).toBe(true);

    const retries = await retryEvents(id);
    expect(retries.map((r) => [r.attempt, r.delay_ms, r.delay_source, r.state])).toEqual([
      [1, 200, 'job', 'scheduled'],
      [2, 200, 'job', 'scheduled'],
    ]);
    for (const r of retries) expect(Number(r.scheduled_after_ms)).toBeCloseTo(200, 0);

    // Not claimed early: each retry's claim happens at or after the run time its event announced.
    const early = await db.pool.query<{ attempt: number }>(
      `SELECT c.attempt FROM workhorse.job_event c
       JOIN workhorse.job_event r ON r.job_id = c.job_id AND r.kind = 'retry_scheduled' AND r.attempt = c.attempt - 1
       WHERE c.job_id = $1 AND c.kind = 'claimed' AND c.at < (r.data ->> 'runAt')::timestamptz`,
      [id],
    );
    expect(early.rows).toEqual([]);

    const timeline = await admin.getJobTimeline(id, { limit: 1000 });
    expect(timeline.items.filter((e) => e.source === 'event').map((e) => e.kind)).toEqual([
      'enqueued',
      'claimed',
      'retry_scheduled',
      'promoted',
      'claimed',
      'retry_scheduled',
      'promoted',
      'claimed',
      'failed',
    ]);
    const retryEntries = timeline.items.filter((e) => e.kind === 'retry_scheduled');
    expect(retryEntries.map((e) => [e.data?.delayMs, e.data?.delaySource])).toEqual([
      [200, 'job'],
      [200, 'job'],
    ]);

    const workerEvents = events.filter((e) => e.name.startsWith('job.')).map((e) => e.name);
    expect(workerEvents).toEqual([
      'job.claimed',
      'job.retry_scheduled',
      'job.claimed',
      'job.retry_scheduled',
      'job.claimed',
      'job.failed',
    ]);
    const scheduled = events.filter((e): e is Extract<WorkerEvent, { name: 'job.retry_scheduled' }> => e.name === 'job.retry_scheduled');
    expect(scheduled.map((e) => e.delayMs)).toEqual([200, 200]);
    const failed = events.find((e): e is Extract<WorkerEvent, { name: 'job.failed' }> => e.name === 'job.failed');
    expect(failed?.error).toMatchObject({ name: 'PaymentDeclined', message: 'declined on attempt 3' });
  });

  it('follows an exponential policy end to end: the delays grow from initialMs', async () => {
    const q = 'retry-exp';
    const id = await queue.enqueue('always.throws', null, {
      queue: q,
      maxAttempts: 4,
      retryPolicy: { kind: 'exponential', initialMs: 40, multiplier: 2, maxMs: 100, jitter: false },
    });
    const worker = new Worker(queue, { queues: [q], concurrency: 1, pollMs: 20, tickMs: 20 }).handle('always.throws', async () => {
      throw new Error('nope');
    });
    await runWorker(worker, () => hasOutcome(id), 'the job to end');

    const retries = await retryEvents(id);
    // 40, 80, then capped at maxMs.
    expect(retries.map((r) => [r.attempt, r.delay_ms, r.delay_source])).toEqual([
      [1, 40, 'job'],
      [2, 80, 'job'],
      [3, 100, 'job'],
    ]);
    for (const r of retries) expect(Number(r.scheduled_after_ms)).toBeCloseTo(r.delay_ms, 0);
    expect((await attempts(id)).map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'failed'],
      [2, 'failed'],
      [3, 'failed'],
      [4, 'failed'],
    ]);
    expect(await admin.getJob(id)).toMatchObject({ state: 'failed', currentAttempt: 4, error: { name: 'Error', message: 'nope' } });
  });

  it('with maxAttempts 1 fails at the first error, without a retry', async () => {
    const q = 'retry-once';
    const id = await queue.enqueue('always.throws', null, { queue: q, maxAttempts: 1 });
    const worker = new Worker(queue, { queues: [q], listen: false }).handle('always.throws', async () => {
      throw new TypeError('bad input');
    });
    expect(await worker.runOnce()).toBe(1);
    expect(await admin.getJob(id)).toMatchObject({ state: 'failed', currentAttempt: 1, error: { name: 'TypeError', message: 'bad input' } });
    expect(await retryEvents(id)).toEqual([]);
    expect((await attempts(id)).map((a) => a.outcome)).toEqual(['failed']);
  });
});

describe('retry_delay_ms', () => {
  async function delays(policy: object, attemptsToTry: number[]): Promise<number[]> {
    const { rows } = await db.pool.query<{ d: string }>(
      'SELECT workhorse.retry_delay_ms($1::jsonb, a) AS d FROM unnest($2::int[]) WITH ORDINALITY AS x (a, o) ORDER BY o',
      [JSON.stringify(policy), attemptsToTry],
    );
    return rows.map((r) => Number(r.d));
  }

  it('doubles from initialMs and caps at maxMs without jitter', async () => {
    const policy = { kind: 'exponential', initialMs: 100, multiplier: 2, maxMs: 500, jitter: false };
    expect(await delays(policy, [1, 2, 3, 4, 5, 30, 100])).toEqual([100, 200, 400, 500, 500, 500, 500]);
  });

  it('honours a fractional multiplier', async () => {
    const policy = { kind: 'exponential', initialMs: 100, multiplier: 1.5, maxMs: 100_000, jitter: false };
    expect(await delays(policy, [1, 2, 3])).toEqual([100, 150, 225]);
  });

  it('draws a jittered delay from [50%, 100%] of the nominal value, and does vary', async () => {
    const policy = { kind: 'exponential', initialMs: 1000, multiplier: 2, maxMs: 3_600_000, jitter: true };
    const samples = await delays(policy, Array.from({ length: 200 }, () => 3));
    for (const d of samples) {
      expect(d).toBeGreaterThanOrEqual(2000);
      expect(d).toBeLessThanOrEqual(4000);
    }
    expect(new Set(samples).size).toBeGreaterThan(10);
  });

  it('returns delayMs for a fixed policy, whatever the attempt', async () => {
    expect(await delays({ kind: 'fixed', delayMs: 750 }, [1, 2, 10])).toEqual([750, 750, 750]);
  });

  it('persists the policy with its defaults filled in, and retries by the persisted policy', async () => {
    const q = 'retry-default-policy';
    const id = await queue.enqueue('persisted', null, { queue: q, retryPolicy: { kind: 'exponential', initialMs: 300, jitter: false } });
    const stored = await db.pool.query<{ retry_policy: object }>('SELECT retry_policy FROM workhorse.job WHERE id = $1', [id]);
    expect(stored.rows[0].retry_policy).toEqual({ kind: 'exponential', initialMs: 300, multiplier: 2, maxMs: 3_600_000, jitter: false });

    const first = await claimOne(db.pool, q, { workerId: WORKER });
    expect((await fail(db.pool, first, { name: 'Error', message: 'one' })).delay_ms).toBe('300');
    // The test is about which policy is read, not about waiting: make the retry due now.
    await db.pool.query('UPDATE workhorse.job_runtime SET run_at = clock_timestamp() WHERE job_id = $1', [id]);
    await db.pool.query('SELECT workhorse.promote_v1()');
    const second = await claimOne(db.pool, q, { workerId: WORKER });
    expect(second.attempt).toBe(2);
    const row = await fail(db.pool, second, { name: 'Error', message: 'two' });
    expect(row).toMatchObject({ status: 'retry_scheduled', delay_ms: '600', delay_source: 'job' });
    await db.pool.query('SELECT workhorse.cancel_v1($1)', [id]);
  });
});

describe('what a handler throws', () => {
  it.each<[string, unknown, string]>([
    ['a string', 'out of stock', 'out of stock'],
    ['a plain object', { code: 42, reason: 'quota' }, '{"code":42,"reason":"quota"}'],
    ['a number', 404, '404'],
    ['undefined', undefined, 'undefined'],
  ])('a thrown non-Error (%s) is stored as NonErrorThrown', async (label, thrown, message) => {
    const q = `non-error-${label.replace(/\W+/g, '-')}`;
    const id = await queue.enqueue('throws.anything', null, { queue: q, maxAttempts: 1 });
    const failures: ErrorEnvelope[] = [];
    const worker = new Worker(queue, { queues: [q], listen: false }).handle('throws.anything', async () => {
      throw thrown;
    });
    worker.on((event) => {
      if (event.name === 'job.failed') failures.push(event.error);
    });
    expect(await worker.runOnce()).toBe(1);

    const job = await admin.getJob(id);
    expect(job?.state).toBe('failed');
    expect(job?.error).toEqual({ name: 'NonErrorThrown', message });
    expect(failures).toEqual([{ name: 'NonErrorThrown', message }]);
    expect((await attempts(id)).map((a) => a.error)).toEqual([{ name: 'NonErrorThrown', message }]);
  });
});

describe('a failure is always recorded', () => {
  const huge = 'x'.repeat(3 * 1024 * 1024);
  const throwing = (what: string) => () => {
    throw new Error(`${what} throws`);
  };
  it.each<[string, () => unknown, { name: string; message: RegExp }]>([
    ['an Error whose message is 3 MB', () => new Error(huge), { name: 'Error', message: /^x{32768}… \[truncated: 32768 of 1048576 characters kept\]$/ }],
    [
      'an Error whose retryable getter throws',
      () => Object.defineProperty(new Error('retryable getter'), 'retryable', { get: throwing('retryable') }),
      { name: 'Error', message: /^retryable getter$/ },
    ],
    [
      'an Error whose name getter throws',
      () => Object.defineProperty(new Error('name getter'), 'name', { get: throwing('name') }),
      { name: 'Error', message: /^name getter$/ },
    ],
    ['an object whose toJSON and toString throw', () => ({ toJSON: throwing('toJSON'), toString: throwing('toString') }), { name: 'NonErrorThrown', message: /^\[object Object\]$/ }],
    [
      'a proxy every trap of which throws',
      () => new Proxy({}, { get: throwing('get'), getPrototypeOf: throwing('getPrototypeOf'), ownKeys: throwing('ownKeys') }),
      { name: 'NonErrorThrown', message: /could not be read/ },
    ],
  ])('%s: the attempt is failed at once and the retry policy applies', async (label, make, expected) => {
    const q = `always-recorded-${label.replace(/\W+/g, '-')}`;
    const id = await queue.enqueue('throws.badly', null, { queue: q, maxAttempts: 2, retryPolicy: { kind: 'fixed', delayMs: 0 } });
    const worker = new Worker(queue, { queues: [q], listen: false }).handle('throws.badly', async () => {
      throw make();
    });
    // One pass runs the job to its end: nothing is left waiting for its lease to expire.
    expect(await worker.runOnce()).toBe(1);
    const [attempt] = await attempts(id);
    expect(attempt).toMatchObject({ attempt: 1, outcome: 'failed' });
    expect(attempt.error?.name).toBe(expected.name);
    expect(attempt.error?.message).toMatch(expected.message);
    // The policy (no delay) decided the retry, not the lease: the job is ready for attempt 2.
    const job = await admin.getJob(id);
    expect(job).toMatchObject({ state: 'ready', currentAttempt: 1 });
    await admin.cancel(id);
  });
});

describe('delayed jobs', () => {
  it('a future runAt is not claimed early, and is claimed once promote_v1 finds it due', async () => {
    const q = 'delayed-sql';
    const runAt = new Date(Date.now() + 1500);
    const id = await queue.enqueue('later', null, { queue: q, runAt });
    expect((await admin.getJob(id))?.state).toBe('scheduled');
    expect(await claim(db.pool, q, { workerId: WORKER })).toEqual([]);
    const early = await db.pool.query<{ n: number }>('SELECT workhorse.promote_v1() AS n');
    expect(early.rows[0].n).toBe(0);
    expect(await claim(db.pool, q, { workerId: WORKER })).toEqual([]);

    await waitFor(
      async () => {
        await db.pool.query('SELECT workhorse.promote_v1()');
        return (await admin.getJob(id))?.state === 'ready';
      },
      10_000,
      'promotion',
    );
    const claimed = await claimOne(db.pool, q, { workerId: WORKER });
    expect(claimed.jobId).toBe(id);

    const times = await db.pool.query<{ promoted_on_time: boolean; claimed_on_time: boolean }>(
      `SELECT (SELECT at FROM workhorse.job_event WHERE job_id = $1 AND kind = 'promoted') >= j.run_at AS promoted_on_time,
              (SELECT at FROM workhorse.job_event WHERE job_id = $1 AND kind = 'claimed') >= j.run_at AS claimed_on_time
       FROM workhorse.job j WHERE j.id = $1`,
      [id],
    );
    expect(times.rows[0]).toEqual({ promoted_on_time: true, claimed_on_time: true });
    expect(Date.now()).toBeGreaterThanOrEqual(runAt.getTime());
    await db.pool.query('SELECT workhorse.cancel_v1($1)', [id]);
  });

  it('a Worker runOnce runs nothing before runAt, and runs the job once tick_v1 has promoted it', async () => {
    const q = 'delayed-worker';
    const runAt = new Date(Date.now() + 1500);
    const id = await queue.enqueue('later', { n: 1 }, { queue: q, runAt });
    const ranAt: number[] = [];
    const worker = new Worker(queue, { queues: [q], listen: false }).handle('later', async () => {
      ranAt.push(Date.now());
      return 'done';
    });

    expect(await worker.runOnce()).toBe(0);
    expect(ranAt).toEqual([]);
    await waitFor(async () => (await worker.runOnce()) === 1, 10_000, 'the delayed job to run');
    expect(ranAt).toHaveLength(1);
    expect(ranAt[0]).toBeGreaterThanOrEqual(runAt.getTime());
    expect(await admin.getJob(id)).toMatchObject({ state: 'succeeded', result: 'done' });
  });
});

describe('fail_v1 options', () => {
  it('nonRetryable fails at once, whatever attempts remain', async () => {
    const q = 'fail-non-retryable';
    const id = await queue.enqueue('fail.opts', null, { queue: q, maxAttempts: 5 });
    const job = await claimOne(db.pool, q, { workerId: WORKER });
    const error = { name: 'ValidationFailed', message: 'the order does not exist' };
    expect(await fail(db.pool, job, error, { nonRetryable: true })).toEqual({ status: 'failed', run_at: null, delay_ms: null, delay_source: null });

    expect(await admin.getJob(id)).toMatchObject({ state: 'failed', currentAttempt: 1, maxAttempts: 5, error });
    expect((await attempts(id)).map((a) => [a.attempt, a.outcome, a.error])).toEqual([[1, 'failed', error]]);
    expect(await retryEvents(id)).toEqual([]);
  });

  it('retryDelayMs overrides the policy and is reported as an explicit delay', async () => {
    const q = 'fail-explicit';
    const id = await queue.enqueue('fail.opts', null, { queue: q, maxAttempts: 5, retryPolicy: { kind: 'fixed', delayMs: 200 } });
    const job = await claimOne(db.pool, q, { workerId: WORKER });
    const row = await fail(db.pool, job, { name: 'RateLimited', message: 'slow down' }, { retryDelayMs: 5000 });
    expect(row).toMatchObject({ status: 'retry_scheduled', delay_ms: '5000', delay_source: 'explicit' });

    const runtime = await db.pool.query<{ state: string; run_at: Date; after_ms: string; matches_event: boolean; current_attempt: number }>(
      `SELECT r.state, r.run_at, r.current_attempt, extract(epoch FROM r.run_at - e.at) * 1000 AS after_ms,
              r.run_at = (e.data ->> 'runAt')::timestamptz AS matches_event
       FROM workhorse.job_runtime r JOIN workhorse.job_event e ON e.job_id = r.job_id AND e.kind = 'retry_scheduled'
       WHERE r.job_id = $1`,
      [id],
    );
    expect(runtime.rows[0]).toMatchObject({ state: 'scheduled', current_attempt: 1, matches_event: true });
    expect(Number(runtime.rows[0].after_ms)).toBeCloseTo(5000, 0);
    expect(row.run_at?.getTime()).toBe(runtime.rows[0].run_at.getTime());

    const retries = await retryEvents(id);
    expect(retries.map((r) => [r.attempt, r.delay_ms, r.delay_source, r.state])).toEqual([[1, 5000, 'explicit', 'scheduled']]);
    // Not due yet, so neither promotion nor a claim may pick it up.
    await db.pool.query('SELECT workhorse.promote_v1()');
    expect(await claim(db.pool, q, { workerId: WORKER })).toEqual([]);
    expect((await admin.getJob(id))?.error).toEqual({ name: 'RateLimited', message: 'slow down' });
    await db.pool.query('SELECT workhorse.cancel_v1($1)', [id]);
  });

  it('retryDelayMs 0 makes the job ready at once, and the next claim starts attempt 2', async () => {
    const q = 'fail-explicit-zero';
    const id = await queue.enqueue('fail.opts', null, { queue: q, maxAttempts: 2, retryPolicy: { kind: 'fixed', delayMs: 60_000 } });
    const first = await claimOne(db.pool, q, { workerId: WORKER });
    expect(await fail(db.pool, first, { name: 'Error', message: 'x' }, { retryDelayMs: 0 })).toMatchObject({
      status: 'retry_scheduled',
      delay_ms: '0',
      delay_source: 'explicit',
    });
    expect((await admin.getJob(id))?.state).toBe('ready');
    const second = await claimOne(db.pool, q, { workerId: WORKER });
    expect(second).toMatchObject({ jobId: id, attempt: 2 });
    // The last attempt fails terminally even when a delay is offered.
    expect((await fail(db.pool, second, { name: 'Error', message: 'y' }, { retryDelayMs: 0 })).status).toBe('failed');
    expect(await admin.getJob(id)).toMatchObject({ state: 'failed', currentAttempt: 2, error: { name: 'Error', message: 'y' } });
  });

  it('a fail from a worker that does not own the job is stale and changes nothing', async () => {
    const q = 'fail-stale';
    const id = await queue.enqueue('fail.opts', null, { queue: q });
    const job = await claimOne(db.pool, q, { workerId: WORKER });
    expect((await fail(db.pool, { ...job, workerId: 'intruder' }, { name: 'Error', message: 'x' })).status).toBe('stale');
    expect((await fail(db.pool, { ...job, fence: String(BigInt(job.fence) + 1000n) }, { name: 'Error', message: 'x' })).status).toBe(
      'stale',
    );
    expect(await admin.getJob(id)).toMatchObject({ state: 'active', currentAttempt: 1, error: null });
    expect(await attempts(id)).toEqual([]);
    await db.pool.query('SELECT workhorse.cancel_v1($1)', [id]);
    await db.pool.query('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3)', [id, WORKER, job.fence]);
  });
});
