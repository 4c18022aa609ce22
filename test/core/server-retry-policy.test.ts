/**
 * The retry policy on the attempts the server closes itself. An execution timeout or a lease
 * that ran out is closed by maintenance (recover_expired_v1), not reported by a worker, yet it
 * follows the same policy as a reported failure: the job's own, else the handler's (which
 * workers register when they start: register_handlers_v1), else the default. A timed-out
 * attempt stays a `timeout` whatever happens to the lease afterwards.
 */
import { fromPgError, Worker, WorkhorseValidationError, type HandlerContext, type TimelineEntry } from '../../lib/core';
import { freshQueue } from '../support/db';
import { claimOne, forceExpire } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { gate, waitFor } from '../support/wait';

const { db, queue, admin } = useTestDatabase({
  afterEachTest: () => Promise.all(workers.splice(0).map((w) => w.stop())),
});
const workers: Worker[] = [];

async function register(workerId: string, queues: string[], handlers: unknown): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT workhorse.register_handlers_v1($1, $2, $3::jsonb) AS n', [
    workerId,
    queues,
    JSON.stringify(handlers),
  ]);
  return rows[0].n;
}

async function registered(queues: string[]): Promise<{ queue: string; type: string; retry_policy: unknown; worker_id: string }[]> {
  const { rows } = await db.pool.query(
    'SELECT queue, type, retry_policy, worker_id FROM workhorse.handler_policy WHERE queue = ANY ($1) ORDER BY queue, type',
    [queues],
  );
  return rows;
}

async function recover(): Promise<number> {
  return (await db.pool.query<{ n: number }>('SELECT workhorse.recover_expired_v1(1000) AS n')).rows[0].n;
}

/** Moves the attempt's execution deadline into the past (the lease stays as it is). */
async function forceTimeout(jobId: string): Promise<void> {
  await db.pool.query(
    "UPDATE workhorse.job_runtime SET attempt_deadline = clock_timestamp() - interval '1 second' WHERE job_id = $1",
    [jobId],
  );
}

async function closing(jobId: string): Promise<TimelineEntry> {
  const items = (await admin.getJobTimeline(jobId, { limit: 1000 })).items;
  const found = items.filter((e) => e.source === 'event' && (e.kind === 'timed_out' || e.kind === 'lease_expired'));
  expect(found).toHaveLength(1);
  return found[0];
}

async function attemptOutcomes(jobId: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ outcome: string }>(
    'SELECT outcome FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
    [jobId],
  );
  return rows.map((r) => r.outcome);
}

/** Ends a live job so it does not stay behind. */
async function cleanUp(jobId: string): Promise<void> {
  await admin.cancel(jobId);
}

describe('register_handlers_v1', () => {
  it('records each handler for each queue, normalised; a later registration of the same queue and type wins', async () => {
    const a = freshQueue();
    const b = freshQueue();
    expect(
      await register('deploy-1', [a, b], [{ type: 'mail.send', retryPolicy: { kind: 'fixed', delayMs: 5000 } }, { type: 'mail.bounce' }]),
    ).toBe(4);
    expect(await registered([a, b])).toEqual([
      { queue: a, type: 'mail.bounce', retry_policy: null, worker_id: 'deploy-1' },
      { queue: a, type: 'mail.send', retry_policy: { kind: 'fixed', delayMs: 5000 }, worker_id: 'deploy-1' },
      { queue: b, type: 'mail.bounce', retry_policy: null, worker_id: 'deploy-1' },
      { queue: b, type: 'mail.send', retry_policy: { kind: 'fixed', delayMs: 5000 }, worker_id: 'deploy-1' },
    ]);
    // Another deployment, started later, serves queue b with another policy: b follows it, a does not change.
    expect(await register('deploy-2', [b], [{ type: 'mail.send', retryPolicy: { kind: 'exponential', initialMs: 200 } }])).toBe(1);
    const rows = await registered([a, b]);
    expect(rows.find((r) => r.queue === a && r.type === 'mail.send')).toMatchObject({ worker_id: 'deploy-1' });
    expect(rows.find((r) => r.queue === b && r.type === 'mail.send')).toEqual({
      queue: b,
      type: 'mail.send',
      retry_policy: { kind: 'exponential', initialMs: 200, multiplier: 2, maxMs: 3_600_000, jitter: true },
      worker_id: 'deploy-2',
    });
  });

  it('refuses bad input with a validation error naming the field, and writes nothing', async () => {
    const q = freshQueue();
    const cases: [string[], unknown, string][] = [
      [[], [{ type: 'x' }], 'queues'],
      [['bad queue'], [{ type: 'x' }], 'queues[0]'],
      [[q], {}, 'handlers'],
      [[q], [{ type: 'x', retry: {} }], 'handlers[0].retry'],
      [[q], [{ type: '' }], 'handlers[0].type'],
      [[q], [{ type: 'x' }, { type: 'y', retryPolicy: { kind: 'sometimes' } }], 'handlers[1].retryPolicy.kind'],
      [[q], [{ type: 'x' }, { type: 'x' }], 'handlers'],
    ];
    for (const [queues, handlers, field] of cases) {
      const error = await register('w', queues, handlers).catch((e: unknown) => fromPgError(e));
      expect(error).toBeInstanceOf(WorkhorseValidationError);
      expect(error).toMatchObject({ field });
    }
    expect(await registered([q])).toEqual([]);
  });

  it('a Worker registers its handlers for its queues when it starts', async () => {
    const q = freshQueue();
    const worker = new Worker(queue, { queues: [q], workerId: 'registering-worker', listen: false })
      .handle('reg.with', async () => null, { retry: { kind: 'fixed', delayMs: 1234 } })
      .handle('reg.without', async () => null);
    expect(await worker.runOnce()).toBe(0);
    expect(await registered([q])).toEqual([
      { queue: q, type: 'reg.with', retry_policy: { kind: 'fixed', delayMs: 1234 }, worker_id: 'registering-worker' },
      { queue: q, type: 'reg.without', retry_policy: null, worker_id: 'registering-worker' },
    ]);
  });
});

describe('an execution timeout closed by maintenance', () => {
  it("follows the handler's registered policy when the job has none", async () => {
    const q = freshQueue();
    await register('w', [q], [{ type: 'slow.job', retryPolicy: { kind: 'fixed', delayMs: 60_000 } }]);
    const jobId = await queue.enqueue('slow.job', {}, { queue: q, executionTimeoutMs: 60_000, maxAttempts: 3 });
    await claimOne(db.pool, q, { workerId: 'w' });
    await forceTimeout(jobId);
    expect(await recover()).toBe(1);

    expect(await attemptOutcomes(jobId)).toEqual(['timeout']);
    const event = await closing(jobId);
    expect(event.kind).toBe('timed_out');
    expect(event.data).toMatchObject({ delayMs: 60_000, delaySource: 'handler', state: 'scheduled' });
    const snapshot = await admin.getJob(jobId);
    expect(snapshot).toMatchObject({ state: 'scheduled', currentAttempt: 1, error: { name: 'ExecutionTimeout' } });
    // Counted from the moment the attempt ended (the execution deadline, a second ago).
    const delay = (snapshot?.runAt.getTime() ?? 0) - Date.now();
    expect(delay).toBeGreaterThan(50_000);
    expect(delay).toBeLessThanOrEqual(60_000);
    await cleanUp(jobId);
  });

  it("the job's own policy wins over the handler's; without either, the default applies", async () => {
    const q = freshQueue();
    await register('w', [q], [{ type: 'slow.job', retryPolicy: { kind: 'fixed', delayMs: 60_000 } }, { type: 'plain.job' }]);
    const own = await queue.enqueue('slow.job', {}, { queue: q, executionTimeoutMs: 60_000, retryPolicy: { kind: 'fixed', delayMs: 30_000 } });
    const plain = await queue.enqueue('plain.job', {}, { queue: q, executionTimeoutMs: 60_000 });
    for (const jobId of [own, plain]) {
      await claimOne(db.pool, q, { workerId: 'w' });
      await forceTimeout(jobId);
    }
    expect(await recover()).toBe(2);
    expect((await closing(own)).data).toMatchObject({ delayMs: 30_000, delaySource: 'job' });
    const fallback = await closing(plain);
    expect(fallback.data).toMatchObject({ delaySource: 'default' });
    expect(Number((fallback.data as { delayMs: number }).delayMs)).toBeLessThanOrEqual(1000);
    await cleanUp(own);
    await cleanUp(plain);
  });

  it('stays a `timeout` when the lease ran out after the execution deadline; an attempt whose lease ran out first is `expired`', async () => {
    const q = freshQueue();
    const timedOut = await queue.enqueue('slow.job', {}, { queue: q, executionTimeoutMs: 60_000 });
    await claimOne(db.pool, q, { workerId: 'w' });
    const lost = await queue.enqueue('slow.job', {}, { queue: q, executionTimeoutMs: 60_000 });
    await claimOne(db.pool, q, { workerId: 'w' });
    // Both have passed by now; what counts is which ran out first.
    await db.pool.query(
      `UPDATE workhorse.job_runtime SET attempt_deadline = clock_timestamp() - interval '5 seconds',
                                        lease_expires_at = clock_timestamp() - interval '1 second' WHERE job_id = $1`,
      [timedOut],
    );
    await db.pool.query(
      `UPDATE workhorse.job_runtime SET attempt_deadline = clock_timestamp() - interval '1 second',
                                        lease_expires_at = clock_timestamp() - interval '5 seconds' WHERE job_id = $1`,
      [lost],
    );
    expect(await recover()).toBe(2);
    expect(await attemptOutcomes(timedOut)).toEqual(['timeout']);
    expect((await closing(timedOut)).kind).toBe('timed_out');
    expect((await admin.getJob(timedOut))?.error?.name).toBe('ExecutionTimeout');
    expect(await attemptOutcomes(lost)).toEqual(['expired']);
    expect((await closing(lost)).kind).toBe('lease_expired');
    expect((await admin.getJob(lost))?.error?.name).toBe('LeaseExpired');
    await cleanUp(timedOut);
    await cleanUp(lost);
  });

  it('with a real worker whose handler ignores its signal: the server closes the timeout with the handler policy', async () => {
    const q = freshQueue();
    const hold = gate();
    let calls = 0;
    const worker = new Worker(queue, {
      queues: [q],
      listen: false,
      pollMs: 50,
      tickMs: 100,
      leaseMs: 3000,
      heartbeatMs: 200,
      shutdownTimeoutMs: 100,
    }).handle(
      'stubborn.job',
      async (_payload: unknown, _ctx: HandlerContext) => {
        calls++;
        // Never looks at ctx.signal: it runs on past the execution timeout.
        await hold.promise;
        return 'too late';
      },
      { retry: { kind: 'fixed', delayMs: 60_000 } },
    );
    workers.push(worker);
    const jobId = await queue.enqueue('stubborn.job', {}, { queue: q, executionTimeoutMs: 1000, maxAttempts: 3 });
    void worker.run().catch(() => undefined);

    const event = await waitFor(
      async () => (await admin.getJobTimeline(jobId)).items.find((e) => e.kind === 'timed_out'),
      15_000,
      'the timed-out attempt to be closed',
    );
    hold.open();
    expect(event.data).toMatchObject({ delayMs: 60_000, delaySource: 'handler', state: 'scheduled' });
    expect(await attemptOutcomes(jobId)).toEqual(['timeout']);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'scheduled', currentAttempt: 1 });
    expect(calls).toBe(1);
    await worker.stop();
    await cleanUp(jobId);
  });
});

describe('a lease that ran out', () => {
  it('follows the policy too, counted from the moment the lease ran out', async () => {
    const q = freshQueue();
    await register('w', [q], [{ type: 'crashy.job', retryPolicy: { kind: 'fixed', delayMs: 60_000 } }]);
    const jobId = await queue.enqueue('crashy.job', {}, { queue: q, maxAttempts: 3 });
    await claimOne(db.pool, q, { workerId: 'doomed' });
    await forceExpire(db.pool, jobId);
    expect(await recover()).toBe(1);

    expect(await attemptOutcomes(jobId)).toEqual(['expired']);
    expect((await closing(jobId)).data).toMatchObject({ delayMs: 60_000, delaySource: 'handler', state: 'scheduled' });
    const snapshot = await admin.getJob(jobId);
    expect(snapshot).toMatchObject({ state: 'scheduled', currentAttempt: 1, error: { name: 'LeaseExpired' } });
    const delay = (snapshot?.runAt.getTime() ?? 0) - Date.now();
    expect(delay).toBeGreaterThan(50_000);
    expect(delay).toBeLessThanOrEqual(60_000);
    await cleanUp(jobId);
  });

  it('is ready at once when the delay has already passed since the lease ran out', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('crashy.job', {}, { queue: q, retryPolicy: { kind: 'fixed', delayMs: 500 } });
    await claimOne(db.pool, q, { workerId: 'doomed' });
    // Ran out a second ago (forceExpire): the 500 ms delay is over.
    await forceExpire(db.pool, jobId);
    expect(await recover()).toBe(1);
    expect((await closing(jobId)).data).toMatchObject({ delayMs: 500, delaySource: 'job', state: 'ready' });
    expect((await admin.getJob(jobId))?.state).toBe('ready');
    await cleanUp(jobId);
  });

  it('fails for good when the next attempt could not start before the deadline', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('crashy.job', {}, {
      queue: q,
      maxAttempts: 5,
      deadline: new Date(Date.now() + 30_000),
      retryPolicy: { kind: 'fixed', delayMs: 60_000 },
    });
    await claimOne(db.pool, q, { workerId: 'doomed' });
    await forceExpire(db.pool, jobId);
    expect(await recover()).toBe(1);
    expect(await attemptOutcomes(jobId)).toEqual(['expired']);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'failed', currentAttempt: 1, error: { name: 'LeaseExpired' } });
  });
});
