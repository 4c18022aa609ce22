/**
 * The Worker's lifecycle: run/stop/drain, shutdown abandonment, LISTEN wake-up and polling,
 * heartbeats, batched claims, unknown types, runOnce, pause/resume, option validation and events.
 */
import { Pool } from 'pg';
import {
  Queue,
  SchemaNotInstalledError,
  Worker,
  WorkerShutdownError,
  WorkerStateError,
  WorkhorseValidationError,
  type HandlerContext,
  type WorkerEvent,
  type WorkerOptions,
} from '../../lib/core';
import { freePort } from '../../lib/testing/free-port';
import { createTestDatabase, freshQueue } from '../support/db';
import { stateOf } from '../support/job-state';
import { useTestDatabase } from '../support/test-database';
import { delay, gate, waitFor } from '../support/wait';

const { db, pool, queue, admin } = useTestDatabase({
  afterEachTest: async () => {
    for (const s of started.splice(0)) {
      await s.worker.stop();
      await s.done;
    }
  },
});

interface Started {
  worker: Worker;
  events: WorkerEvent[];
  done: Promise<void>;
  finished: () => boolean;
}
const started: Started[] = [];

function start(worker: Worker): Started {
  const events: WorkerEvent[] = [];
  worker.on((event) => events.push(event));
  let finished = false;
  const done = worker.run().then(() => {
    finished = true;
  });
  const s: Started = { worker, events, done, finished: () => finished };
  started.push(s);
  return s;
}

function eventFor(events: WorkerEvent[], name: WorkerEvent['name'], jobId: string): WorkerEvent | undefined {
  return events.find((e) => e.name === name && 'jobId' in e && e.jobId === jobId);
}

/** How many of `ids` ended in each terminal state. */
async function outcomeCounts(ids: string[]): Promise<{ state: string; n: number }[]> {
  const { rows } = await pool.query<{ state: string; n: number }>(
    'SELECT state, count(*)::int AS n FROM workhorse.job_outcome WHERE job_id = ANY ($1::uuid[]) GROUP BY state ORDER BY state',
    [ids],
  );
  return rows;
}

/** The most of `ids` one claim took (the jobs of one claim share its `claimed` timestamp). */
async function largestClaim(ids: string[]): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM workhorse.job_event WHERE kind = 'claimed' AND job_id = ANY ($1::uuid[]) GROUP BY at ORDER BY 1 DESC LIMIT 1",
    [ids],
  );
  return rows[0].n;
}

/**
 * Runs `count` jobs of a fresh queue through a worker with `options`; job n holds its slot for
 * `holdMs(n)`. Returns the job ids, the most handlers that ran at once and the worker's events.
 */
async function runCounted(
  count: number,
  options: WorkerOptions,
  holdMs: (n: number) => number,
): Promise<{ ids: string[]; peak: number; events: WorkerEvent[] }> {
  const q = freshQueue();
  const ids = await queue.enqueueMany(Array.from({ length: count }, (_, n) => ({ type: 'counted.job', payload: { n }, queue: q })));
  let running = 0;
  let peak = 0;
  const worker = new Worker(queue, { queues: [q], pollMs: 100, ...options }).handle('counted.job', async (payload: { n: number }) => {
    running += 1;
    peak = Math.max(peak, running);
    await delay(holdMs(payload.n));
    running -= 1;
    return payload.n;
  });
  const s = start(worker);
  for (const id of ids) await waitFor(() => eventFor(s.events, 'job.succeeded', id), 20000, `job ${id} to succeed`);
  return { ids, peak, events: s.events };
}

async function attemptsOf(jobId: string): Promise<{ attempt: number; outcome: string; worker_id: string }[]> {
  const { rows } = await pool.query<{ attempt: number; outcome: string; worker_id: string }>(
    'SELECT attempt, outcome, worker_id FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
    [jobId],
  );
  return rows;
}

describe('Worker lifecycle', () => {
  it('run() keeps working until stop(), then resolves; worker.started and worker.stopped bracket it', async () => {
    const q = freshQueue();
    const worker = new Worker(queue, { queues: [q], pollMs: 100 }).handle('life.job', async () => 'ok');
    const s = start(worker);
    const jobId = await queue.enqueue('life.job', {}, { queue: q });
    await waitFor(() => eventFor(s.events, 'job.succeeded', jobId), 10000, 'the job to succeed');
    expect(s.finished()).toBe(false);
    expect(worker.isRunning).toBe(true);
    await expect(worker.run()).rejects.toBeInstanceOf(WorkerStateError);

    await worker.stop();
    await s.done;
    expect(s.finished()).toBe(true);
    expect(worker.isRunning).toBe(false);
    expect(s.events[0]).toMatchObject({ name: 'worker.started', workerId: worker.workerId, queues: [q] });
    expect(s.events[s.events.length - 1]).toMatchObject({ name: 'worker.stopped', workerId: worker.workerId });
    expect(await stateOf(pool, jobId)).toBe('succeeded');
  });

  it('stop() lets a running handler finish within shutdownTimeoutMs and claims nothing new', async () => {
    const q = freshQueue();
    const release = gate();
    let ctxSeen: HandlerContext | undefined;
    const worker = new Worker(queue, { queues: [q], concurrency: 1, pollMs: 100, shutdownTimeoutMs: 20000 });
    worker.handle('drain.job', async (payload: { n: number }, ctx: HandlerContext) => {
      ctxSeen = ctx;
      await release.promise;
      return { n: payload.n };
    });
    const s = start(worker);
    const first = await queue.enqueue('drain.job', { n: 1 }, { queue: q });
    const ctx = await waitFor(() => ctxSeen, 10000, 'the handler to start');

    const stopping = worker.stop();
    const second = await queue.enqueue('drain.job', { n: 2 }, { queue: q });
    release.open();
    await stopping;
    await s.done;

    expect(ctx.signal.aborted).toBe(false);
    expect(await admin.getJob(first)).toMatchObject({ state: 'succeeded', result: { n: 1 }, currentAttempt: 1 });
    expect(await admin.getJob(second)).toMatchObject({ state: 'ready', currentAttempt: 0 });
    const names = s.events.map((e) => e.name);
    expect(names).not.toContain('job.abandoned');
    expect(names.indexOf('job.succeeded')).toBeLessThan(names.indexOf('worker.stopped'));
  });

  it('a handler that outlives shutdownTimeoutMs is aborted with WorkerShutdownError and nothing is recorded for it', async () => {
    const q = freshQueue();
    let ctxSeen: HandlerContext | undefined;
    let handlerReturned: Promise<void> | undefined;
    const worker = new Worker(queue, { queues: [q], concurrency: 1, pollMs: 100, leaseMs: 1000, shutdownTimeoutMs: 200 });
    worker.handle('stubborn.job', (_payload: unknown, ctx: HandlerContext) => {
      ctxSeen = ctx;
      const finished = (async () => {
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
        // Returning a result after the abort must not turn into a success.
        await delay(20);
        return { late: true };
      })();
      handlerReturned = finished.then(() => undefined);
      return finished;
    });
    const s = start(worker);
    const jobId = await queue.enqueue('stubborn.job', {}, { queue: q });
    const ctx = await waitFor(() => ctxSeen, 10000, 'the handler to start');

    await worker.stop();
    await s.done;
    await handlerReturned;

    expect(ctx.signal.aborted).toBe(true);
    expect(ctx.signal.reason).toBeInstanceOf(WorkerShutdownError);
    expect(eventFor(s.events, 'job.abandoned', jobId)).toMatchObject({ attempt: 1, workerId: worker.workerId, reason: 'shutdown', abandonedCount: 1 });
    const names = s.events.map((e) => e.name);
    for (const faked of ['job.succeeded', 'job.failed', 'job.retry_scheduled', 'job.canceled']) {
      expect(names).not.toContain(faked);
    }

    // No outcome: the job is still active under the stopped worker until its lease runs out.
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'active', workerId: worker.workerId, currentAttempt: 1 });
    expect((await pool.query('SELECT 1 FROM workhorse.job_outcome WHERE job_id = $1', [jobId])).rowCount).toBe(0);
    expect(await attemptsOf(jobId)).toEqual([]);

    // The stopped worker renews nothing, so the 1 s lease really runs out and recovery takes it
    // (the job waits for its retry delay, counted from the moment the lease ran out).
    const waiting = await waitFor(
      async () => {
        await pool.query('SELECT workhorse.recover_expired_v1(100)');
        const state = await stateOf(pool, jobId);
        return (state === 'ready' || state === 'scheduled') && state;
      },
      10000,
      'recovery to make the job wait for its next attempt',
    );
    expect(await admin.getJob(jobId)).toMatchObject({ state: waiting, currentAttempt: 1, result: null });
    expect(await attemptsOf(jobId)).toEqual([{ attempt: 1, outcome: 'expired', worker_id: worker.workerId }]);
  });
});

describe('handlers that ignore ctx.signal', () => {
  // The case: with an execution timeout of 1 s and handlers that never return, the jobs
  // ended ExecutionTimeout on the server while the worker kept both slots busy forever.
  it('are abandoned abandonAfterMs after their attempt timed out: slots freed, the timeout recorded, counted until they return', async () => {
    const q = freshQueue();
    const release = gate();
    const stuck = new Set<string>();
    const worker = new Worker(queue, { queues: [q], concurrency: 2, pollMs: 50, tickMs: 100, abandonAfterMs: 300 })
      .handle('deaf.job', async (_payload: unknown, ctx: HandlerContext) => {
        stuck.add(ctx.jobId);
        await release.promise; // ignores ctx.signal
        return 'too late';
      })
      .handle('next.job', async () => 'ran');
    const s = start(worker);
    const deaf = await queue.enqueueMany([1, 2].map((n) => ({ type: 'deaf.job', payload: { n }, queue: q, executionTimeoutMs: 1000, maxAttempts: 1 })));
    await waitFor(() => stuck.size === 2, 10000, 'both handlers to start');
    const next = await queue.enqueue('next.job', {}, { queue: q });

    // Both slots come back: the next job runs although the two handlers never returned.
    await waitFor(() => eventFor(s.events, 'job.succeeded', next), 10000, 'the next job to run');
    const abandoned = s.events.filter((e) => e.name === 'job.abandoned');
    expect(abandoned.map((e) => [e.name === 'job.abandoned' && e.reason, e.name === 'job.abandoned' && e.abandonedCount])).toEqual([
      ['timeout', 1],
      ['timeout', 2],
    ]);
    expect(worker.abandonedCount).toBe(2);
    expect(worker.activeCount).toBe(0);
    for (const id of deaf) {
      const job = await waitFor(async () => {
        const j = await admin.getJob(id);
        return j?.state === 'failed' ? j : undefined;
      }, 10000, `job ${id} to fail`);
      // Closed by whichever came first: the server's maintenance (ExecutionTimeout) or the worker
      // as it abandoned the handler (the error its signal carried, ExecutionTimeoutError).
      expect(job.error?.name).toMatch(/^ExecutionTimeout(Error)?$/);
      expect(await attemptsOf(id)).toEqual([{ attempt: 1, outcome: 'timeout', worker_id: worker.workerId }]);
    }

    // When they finally return, the count goes down and what they returned is ignored.
    release.open();
    await waitFor(() => worker.abandonedCount === 0, 10000, 'the abandoned handlers to return');
    for (const id of deaf) {
      expect(await admin.getJob(id)).toMatchObject({ state: 'failed', result: null });
      expect(await attemptsOf(id)).toHaveLength(1);
    }
  });

  it('a transactional one abandoned has its connection closed, so its transaction rolls back at once', async () => {
    const q = freshQueue();
    const release = gate();
    let started = false;
    await pool.query('CREATE TABLE IF NOT EXISTS abandoned_writes (job_id uuid)');
    const worker = new Worker(queue, { queues: [q], concurrency: 1, pollMs: 50, tickMs: 100, abandonAfterMs: 200 }).handle(
      'deaf.tx.job',
      async (_payload: unknown, ctx: HandlerContext) => {
        await ctx.client?.query('INSERT INTO abandoned_writes VALUES ($1)', [ctx.jobId]);
        started = true;
        await release.promise;
      },
      { transactional: true },
    );
    const s = start(worker);
    const id = await queue.enqueue('deaf.tx.job', {}, { queue: q, executionTimeoutMs: 1000, maxAttempts: 1 });
    await waitFor(() => started, 10000, 'the handler to write and wait');
    const openTransactions = async () =>
      (
        await pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        )
      ).rows[0].n;
    expect(await openTransactions()).toBe(1);
    await waitFor(() => eventFor(s.events, 'job.abandoned', id), 10000, 'the handler to be abandoned');
    await waitFor(async () => (await openTransactions()) === 0, 10000, 'its transaction to end');
    expect((await pool.query('SELECT 1 FROM abandoned_writes WHERE job_id = $1', [id])).rowCount).toBe(0);
    release.open();
    await waitFor(() => worker.abandonedCount === 0, 10000, 'the abandoned handler to return');
    await waitFor(async () => (await admin.getJob(id))?.state === 'failed', 10000, 'the job to fail');
  });

  it('are abandoned after a cancel request, and the cancellation is acknowledged', async () => {
    const q = freshQueue();
    const release = gate();
    let started = false;
    const worker = new Worker(queue, { queues: [q], concurrency: 1, pollMs: 50, leaseMs: 3000, heartbeatMs: 100, abandonAfterMs: 200 }).handle(
      'deaf.job',
      async () => {
        started = true;
        await release.promise;
      },
    );
    const s = start(worker);
    const id = await queue.enqueue('deaf.job', {}, { queue: q });
    await waitFor(() => started, 10000, 'the handler to start');
    await admin.cancel(id);
    await waitFor(() => eventFor(s.events, 'job.canceled', id), 10000, 'the cancellation to be acknowledged');
    expect(eventFor(s.events, 'job.abandoned', id)).toMatchObject({ reason: 'canceled', abandonedCount: 1 });
    expect((await admin.getJob(id))?.state).toBe('canceled');
    expect(worker.abandonedCount).toBe(1);
    release.open();
    await waitFor(() => worker.abandonedCount === 0, 10000, 'the abandoned handler to return');
  });
});

describe('starting', () => {
  it('run() and runOnce() on a database without the schema fail at once with SchemaNotInstalledError, saying what to run', async () => {
    const bare = await createTestDatabase({ installSchema: false });
    try {
      const worker = new Worker(new Queue(bare.pool), { pollMs: 50, tickMs: 50 });
      const errors: WorkerEvent[] = [];
      worker.on(['worker.error'], (event) => errors.push(event));
      const startedAt = Date.now();
      const run = worker.run();
      await expect(run).rejects.toBeInstanceOf(SchemaNotInstalledError);
      await expect(run).rejects.toThrow('npx workhorse schema migrate');
      await expect(worker.runOnce()).rejects.toBeInstanceOf(SchemaNotInstalledError);
      // At once: no loop of failing claims and ticks first.
      expect(Date.now() - startedAt).toBeLessThan(5000);
      expect(errors).toEqual([]);
      expect(worker.isRunning).toBe(false);
    } finally {
      await bare.drop();
    }
  });

  it('while it checks the schema, an idle pool connection that breaks is reported, not left to crash the process', async () => {
    const appName = 'worker-start-pool-error';
    const own = new Pool({ connectionString: db.url, max: 3, application_name: appName });
    // Two idle connections in the pool, and the schema check held up by a lock.
    await Promise.all([own.query('SELECT pg_sleep(0.05)'), own.query('SELECT pg_sleep(0.05)')]);
    const locker = await pool.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE workhorse.schema_version IN ACCESS EXCLUSIVE MODE');
    const worker = new Worker(new Queue(own), { queues: [freshQueue()] });
    const errors: WorkerEvent[] = [];
    worker.on(['worker.error'], (event) => errors.push(event));
    const run = worker.run();
    try {
      const blocked = await waitFor(async () => {
        const { rows } = await pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
          [appName],
        );
        return rows[0].n === 1;
      }, 10000, 'the schema check to wait for the lock');
      expect(blocked).toBe(true);
      await pool.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle'", [appName]);
      await waitFor(() => errors.some((e) => e.name === 'worker.error' && e.during === 'pool'), 10000, 'the broken connection to be reported');
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
    }
    await waitFor(() => worker.isRunning, 10000, 'the worker to start');
    await worker.stop();
    await run;
    await own.end();
  });

  it('stop() while the schema check is answering: run() settles and nothing starts (no claim, no tick)', async () => {
    const worker = new Worker(new Queue(pool), { queues: [freshQueue()], pollMs: 20, tickMs: 20 });
    const started: WorkerEvent[] = [];
    worker.on(['worker.started'], (event) => started.push(event));
    const run = worker.run();
    // The check's query is on its way; its answer comes after the stop.
    const stopping = worker.stop();
    await stopping;
    await expect(run).resolves.toBeUndefined();
    expect(started).toEqual([]);
    expect(worker.isRunning).toBe(false);
  });

  it('run() waits for a database it cannot reach, reporting each try as worker.error during start, until stopped', async () => {
    const unreachable = new URL(db.url);
    unreachable.port = String(await freePort());
    const closed = new Pool({ connectionString: unreachable.toString() });
    try {
      const worker = new Worker(new Queue(closed));
      const errors: WorkerEvent[] = [];
      worker.on(['worker.error'], (event) => errors.push(event));
      const run = worker.run();
      await waitFor(() => errors.length >= 2, 10000, 'two failed tries');
      expect(errors.every((e) => e.name === 'worker.error' && e.during === 'start')).toBe(true);
      expect(worker.isRunning).toBe(false);
      await worker.stop();
      await expect(run).resolves.toBeUndefined();
    } finally {
      await closed.end();
    }
  });
});

describe('Worker wake-up', () => {
  it('with pollMs 60000, a job enqueued while the worker is idle runs at once: NOTIFY woke it', async () => {
    const q = freshQueue();
    const worker = new Worker(queue, { queues: [q], pollMs: 60000, concurrency: 2 }).handle('wake.job', async () => 'woken');
    const s = start(worker);

    await waitFor(
      async () =>
        (
          await pool.query(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN workhorse_jobs'",
          )
        ).rowCount === 1,
      10000,
      'the LISTEN connection',
    );
    // The start-up claims must be over, or one of them (not the notification) could pick the job
    // up: wait until no claim has been running for several consecutive looks.
    let quiet = 0;
    await waitFor(
      async () => {
        const busy = await pool.query(
          "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active' AND query LIKE '%claim_many_v1%'",
        );
        quiet = busy.rowCount === 0 ? quiet + 1 : 0;
        return quiet >= 8;
      },
      10000,
      'the worker to go idle',
    );

    const jobId = await queue.enqueue('wake.job', {}, { queue: q });
    // The next poll is at least 48 s away (pollMs less 20 % jitter), so only NOTIFY can explain this.
    await waitFor(() => eventFor(s.events, 'job.succeeded', jobId), 10000, 'the job to succeed');
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'succeeded', result: 'woken' });
  });

  it('with listen: false, polling alone still runs the jobs', async () => {
    const q = freshQueue();
    const since = (await pool.query<{ now: Date }>('SELECT clock_timestamp() AS now')).rows[0].now;
    const worker = new Worker(queue, { queues: [q], listen: false, pollMs: 200 }).handle(
      'poll.job',
      async (payload: { n: number }) => payload.n * 2,
    );
    const s = start(worker);
    await waitFor(() => s.events.find((e) => e.name === 'worker.started'), 5000, 'worker.started');
    const ids = await queue.enqueueMany([1, 2, 3].map((n) => ({ type: 'poll.job', payload: { n }, queue: q })));
    for (const id of ids) await waitFor(() => eventFor(s.events, 'job.succeeded', id), 10000, `job ${id} to succeed`);
    for (const [i, id] of ids.entries()) {
      expect(await admin.getJob(id)).toMatchObject({ state: 'succeeded', result: (i + 1) * 2 });
    }
    const listeners = await pool.query(
      "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%' AND backend_start >= $1",
      [since],
    );
    expect(listeners.rowCount).toBe(0);
  });
});

describe('Worker leases and claims', () => {
  it('heartbeats keep a job alive beyond its lease (lease 1 s, handler 3 s)', async () => {
    const q = freshQueue();
    let ctxSeen: HandlerContext | undefined;
    const worker = new Worker(queue, { queues: [q], leaseMs: 1000, pollMs: 100 }).handle(
      'long.job',
      async (_payload: unknown, ctx: HandlerContext) => {
        ctxSeen = ctx;
        await delay(3000);
        return { attempt: ctx.attempt };
      },
    );
    const s = start(worker);
    const jobId = await queue.enqueue('long.job', {}, { queue: q, maxAttempts: 3 });
    // Recover as eagerly as possible meanwhile: only renewed leases survive this.
    await waitFor(
      async () => {
        await pool.query('SELECT workhorse.recover_expired_v1(100)');
        return eventFor(s.events, 'job.succeeded', jobId);
      },
      15000,
      'the job to succeed',
    );
    expect(ctxSeen?.signal.aborted).toBe(false);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'succeeded', currentAttempt: 1, result: { attempt: 1 } });
    expect(await attemptsOf(jobId)).toEqual([{ attempt: 1, outcome: 'succeeded', worker_id: worker.workerId }]);
    const kinds = (await admin.getJobTimeline(jobId)).items.map((e) => e.kind);
    expect(kinds).not.toContain('lease_expired');
    expect(s.events.map((e) => e.name)).not.toContain('job.lease_lost');
  });

  it('claims in batches and never runs more than concurrency handlers at once (5 of 20)', async () => {
    const { ids, peak } = await runCounted(20, { concurrency: 5 }, () => 100);
    expect(peak).toBe(5);
    expect(await outcomeCounts(ids)).toEqual([{ state: 'succeeded', n: 20 }]);
    // The first claim took all five free slots in one call: five claims share one timestamp.
    expect(await largestClaim(ids)).toBe(5);
  });

  it('fills 250 free slots with one claim of 250 (a round trip is not capped below concurrency)', async () => {
    const { ids, peak } = await runCounted(300, { concurrency: 250 }, () => 50);
    expect(peak).toBe(250);
    expect(await outcomeCounts(ids)).toEqual([{ state: 'succeeded', n: 300 }]);
    expect(await largestClaim(ids)).toBe(250);
  });

  it('with roundTrips 2, splits the slots between two round trips: claims of at most four of seven, all seven slots used, never more', async () => {
    const { ids, peak, events } = await runCounted(60, { concurrency: 7, roundTrips: 2 }, (n) => 20 + (n % 3) * 10);
    // Seven at once needs both lanes: one has four slots, the other three.
    expect(peak).toBe(7);
    expect(events.filter((e) => e.name === 'worker.error')).toEqual([]);
    expect(await outcomeCounts(ids)).toEqual([{ state: 'succeeded', n: 60 }]);
    // Seven slots in two lanes of four and three: no claim took more than four jobs.
    expect(await largestClaim(ids)).toBe(4);
  });

  it('releases a job of a type it has no handler for without consuming the attempt; a worker with the handler runs it', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('mystery.job', { secret: 42 }, { queue: q, maxAttempts: 1 });

    const ignorant = new Worker(queue, { queues: [q], workerId: 'ignorant', unknownTypeDelayMs: 300 }).handle(
      'other.job',
      async () => 'never',
    );
    const ignorantEvents: WorkerEvent[] = [];
    ignorant.on((e) => ignorantEvents.push(e));
    expect(await ignorant.runOnce()).toBe(1);
    expect(ignorantEvents.map((e) => e.name)).toEqual(['job.claimed', 'job.released']);
    expect(ignorantEvents[1]).toMatchObject({ jobId, type: 'mystery.job', reason: expect.stringContaining('mystery.job') });
    // Scheduled for 300 ms later; only a maintenance tick can promote it, and none ran since.
    // Attempt 1 is closed as released: its number is used, but it does not count against maxAttempts.
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'scheduled', currentAttempt: 1, maxAttempts: 1, workerId: null });
    expect(await attemptsOf(jobId)).toEqual([{ attempt: 1, outcome: 'released', worker_id: 'ignorant' }]);
    expect((await admin.getJobTimeline(jobId)).items.map((e) => e.kind)).toContain('released');

    let attemptSeen = 0;
    const able = new Worker(queue, { queues: [q], workerId: 'able', pollMs: 100, tickMs: 100 }).handle(
      'mystery.job',
      async (payload: { secret: number }, ctx: HandlerContext) => {
        attemptSeen = ctx.attempt;
        return payload.secret;
      },
    );
    const s = start(able);
    await waitFor(() => eventFor(s.events, 'job.succeeded', jobId), 10000, 'the able worker to run the job');
    // maxAttempts 1 and it still ran: the release gave the attempt back. Its number is attempt 2.
    expect(attemptSeen).toBe(2);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'succeeded', result: 42, currentAttempt: 2 });
    expect(await attemptsOf(jobId)).toEqual([
      { attempt: 1, outcome: 'released', worker_id: 'ignorant' },
      { attempt: 2, outcome: 'succeeded', worker_id: 'able' },
    ]);
  });

  it('with unknownTypeDelayMs 0 a released job is ready again at once', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('mystery.job', {}, { queue: q });
    const ignorant = new Worker(queue, { queues: [q], unknownTypeDelayMs: 0 });
    expect(await ignorant.runOnce()).toBe(1);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'ready', currentAttempt: 1 });
    // Clean up: run it, so the job does not stay live.
    const able = new Worker(queue, { queues: [q] }).handle('mystery.job', async () => null);
    expect(await able.runOnce()).toBe(1);
    expect(await stateOf(pool, jobId)).toBe('succeeded');
  });

  it('runOnce() runs up to concurrency jobs to the end and returns how many it ran', async () => {
    const q = freshQueue();
    const ids = await queue.enqueueMany([1, 2, 3].map((n) => ({ type: 'once.job', payload: { n }, queue: q })));
    const worker = new Worker(queue, { queues: [q], concurrency: 2 }).handle('once.job', async (payload: { n: number }) => {
      await delay(50);
      return payload.n;
    });
    expect(await worker.runOnce()).toBe(2);
    // FIFO: the first two ran, and they are finished (not merely claimed) when runOnce resolves.
    expect(await Promise.all(ids.map((id) => stateOf(pool, id)))).toEqual(['succeeded', 'succeeded', 'ready']);
    expect(await worker.runOnce()).toBe(1);
    expect(await admin.getJob(ids[2])).toMatchObject({ state: 'succeeded', result: 3 });
    expect(await worker.runOnce()).toBe(0);
    expect(worker.activeCount).toBe(0);
  });

  it('prepares its round trip once per connection, and sends it unprepared where the connection refuses that', async () => {
    const { Pool: PgPool } = await import('pg');
    const names = async (p: Pool) =>
      (await p.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name')).rows.map((r) => r.name);
    const run = async (p: Pool, q: string) => {
      const ids = await queue.enqueueMany([1, 2, 3].map((n) => ({ type: 'prep.job', payload: { n }, queue: q })));
      const worker = new Worker(new Queue(p), { queues: [q], concurrency: 2, pollMs: 50, listen: false }).handle(
        'prep.job',
        async (payload: { n: number }) => payload.n * 10,
      );
      const s = start(worker);
      await waitFor(async () => (await Promise.all(ids.map((id) => stateOf(pool, id)))).every((st) => st === 'succeeded'), 10000, 'the jobs');
      await worker.stop();
      expect(s.events.filter((e) => e.name === 'worker.error')).toEqual([]);
      for (const [i, id] of ids.entries()) expect(await admin.getJob(id)).toMatchObject({ result: (i + 1) * 10 });
    };

    // One connection, so the worker's statements and this test's reads share it.
    const single = new PgPool({ connectionString: db.url, max: 1 });
    try {
      await run(single, freshQueue());
      expect(await names(single)).toEqual(['workhorse.complete_and_claim_v1']);
    } finally {
      await single.end();
    }

    // A connection that already holds a statement of that name (as a pooler in transaction mode
    // may hand over one): the first round trip is refused (42P05; the pool replaces the
    // connection), sent again, and from then on unprepared: no error reaches the worker's events,
    // and the new connection holds no prepared statement.
    const taken = new PgPool({ connectionString: db.url, max: 1 });
    try {
      await taken.query('PREPARE "workhorse.complete_and_claim_v1" AS SELECT 1');
      await run(taken, freshQueue());
      expect(await names(taken)).toEqual([]);
    } finally {
      await taken.end();
    }
  });

  it('pause() stops new claims and resume() restarts them', async () => {
    const q = freshQueue();
    const worker = new Worker(queue, { queues: [q], concurrency: 1, pollMs: 100 }).handle('pause.job', async () => 'done');
    const first = await queue.enqueue('pause.job', { n: 1 }, { queue: q });
    // Pausing from the success event of the only slot's job: no claim can be in flight then.
    worker.on((e) => {
      if (e.name === 'job.succeeded' && e.jobId === first) worker.pause();
    });
    const s = start(worker);
    await waitFor(() => eventFor(s.events, 'job.succeeded', first), 10000, 'the first job');

    const second = await queue.enqueue('pause.job', { n: 2 }, { queue: q });
    // A negative can only be observed over time: ten poll intervals and a NOTIFY go by unanswered.
    await delay(1000);
    expect(await stateOf(pool, second)).toBe('ready');
    expect(eventFor(s.events, 'job.claimed', second)).toBeUndefined();

    worker.resume();
    await waitFor(() => eventFor(s.events, 'job.succeeded', second), 10000, 'the second job after resume()');
    expect(await stateOf(pool, second)).toBe('succeeded');
  });
});

describe('Worker API', () => {
  it('rejects invalid options with WorkhorseValidationError naming the field', () => {
    const cases: [WorkerOptions, string][] = [
      [{ bogus: 1 } as unknown as WorkerOptions, 'bogus'],
      [{ concurrency: 0 }, 'concurrency'],
      [{ leaseMs: 10 }, 'leaseMs'],
      [{ roundTrips: 0 }, 'roundTrips'],
      [{ roundTrips: 5 }, 'roundTrips'],
      [{ roundTrips: 1.5 }, 'roundTrips'],
      [{ concurrency: 2, roundTrips: 3 }, 'roundTrips'],
      // Values that guarantee a malfunction: a lease renewed no sooner than it lapses, a listener
      // without a connection string, a worker id the database cannot store (every statement fails).
      [{ leaseMs: 2000, heartbeatMs: 2000 }, 'heartbeatMs'],
      [{ heartbeatMs: 30_000 }, 'heartbeatMs'],
      [{ listen: { connectionString: '' } }, 'listen'],
      [{ listen: { connectionString: 'postgres://x/y', poolMax: 1 } as unknown as WorkerOptions['listen'] }, 'listen'],
      [{ workerId: 'host\u0000' }, 'workerId'],
      [{ workerId: 'host-\ud83d' }, 'workerId'],
    ];
    for (const [options, field] of cases) {
      let thrown: unknown;
      try {
        new Worker(queue, options);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(WorkhorseValidationError);
      expect((thrown as WorkhorseValidationError).field).toBe(field);
    }
    expect(() => new Worker(queue, { leaseMs: 3000, heartbeatMs: 5000 })).toThrow('heartbeatMs: must be below leaseMs (3000)');
  });

  it('registering a type twice throws', () => {
    const worker = new Worker(queue).handle('twice.job', async () => 1);
    expect(() => worker.handle('twice.job', async () => 2)).toThrow(WorkerStateError);
    expect(worker.types).toEqual(['twice.job']);
  });

  it('a listener that throws does not stop processing; it is reported as worker.error during listener', async () => {
    const q = freshQueue();
    const worker = new Worker(queue, { queues: [q], pollMs: 100 }).handle('noisy.job', async () => 'fine');
    worker.on(() => {
      throw new Error('listener boom');
    });
    const s = start(worker);
    const ids = await queue.enqueueMany([1, 2].map((n) => ({ type: 'noisy.job', payload: { n }, queue: q })));
    for (const id of ids) await waitFor(() => eventFor(s.events, 'job.succeeded', id), 10000, `job ${id} to succeed`);
    for (const id of ids) expect(await stateOf(pool, id)).toBe('succeeded');
    const reported = s.events.filter((e) => e.name === 'worker.error');
    expect(reported.length).toBeGreaterThan(0);
    for (const e of reported) {
      expect(e).toMatchObject({ during: 'listener', error: expect.objectContaining({ message: 'listener boom' }) });
    }
  });

  it('events for a successful job arrive as job.claimed, then job.succeeded', async () => {
    const q = freshQueue();
    const worker = new Worker(queue, { queues: [q], pollMs: 100 }).handle('ordered.job', async () => 'ok');
    const s = start(worker);
    const jobId = await queue.enqueue('ordered.job', {}, { queue: q });
    await waitFor(() => eventFor(s.events, 'job.succeeded', jobId), 10000, 'the job to succeed');
    const forJob = s.events.filter((e) => 'jobId' in e && e.jobId === jobId);
    expect(forJob.map((e) => e.name)).toEqual(['job.claimed', 'job.succeeded']);
    const fields = { jobId, type: 'ordered.job', queue: q, attempt: 1, workerId: worker.workerId };
    expect(forJob[0]).toMatchObject(fields);
    expect(forJob[1]).toMatchObject({ ...fields, durationMs: expect.any(Number) });
  });

  it('a listener given event names gets only those; unsubscribing stops them', async () => {
    const q = freshQueue();
    const worker = new Worker(queue, { queues: [q], pollMs: 100 }).handle('named.job', async (payload: { fail?: boolean }) => {
      if (payload.fail) throw new Error('no');
      return 'ok';
    });
    const ended: WorkerEvent[] = [];
    const lifecycle: WorkerEvent[] = [];
    worker.on(['job.succeeded', 'job.failed'], (event) => ended.push(event));
    const off = worker.on(['worker.started', 'worker.stopped'], (event) => lifecycle.push(event));
    const s = start(worker);
    const [ok, bad] = await queue.enqueueMany([
      { type: 'named.job', payload: {}, queue: q },
      { type: 'named.job', payload: { fail: true }, queue: q, maxAttempts: 1 },
    ]);
    await waitFor(() => ended.length === 2, 10000, 'both jobs to end');
    expect(ended.map((e) => [e.name, 'jobId' in e ? e.jobId : null]).sort()).toEqual(
      [
        ['job.failed', bad],
        ['job.succeeded', ok],
      ].sort(),
    );
    expect(ended.find((e) => e.name === 'job.failed')).toMatchObject({ error: { name: 'Error', message: 'no' }, attempt: 1 });
    // The listener for everything (start()) saw the claims too.
    expect(eventFor(s.events, 'job.claimed', ok)).toBeDefined();
    expect(lifecycle.map((e) => e.name)).toEqual(['worker.started']);
    off();
    await worker.stop();
    await s.done;
    expect(lifecycle.map((e) => e.name)).toEqual(['worker.started']);
    expect(s.events.at(-1)?.name).toBe('worker.stopped');
  });

  it('rejects event names that are not worker events, and an empty list, before subscribing', () => {
    const worker = new Worker(queue);
    expect(() => worker.on(['job.succeeded', 'job.done' as 'job.succeeded'], () => undefined)).toThrow(
      expect.objectContaining({ name: 'WorkhorseValidationError', field: 'names[1]' }),
    );
    expect(() => worker.on([], () => undefined)).toThrow(expect.objectContaining({ field: 'names' }));
    expect(() => worker.on(['job.failed'], 'not a function' as unknown as () => void)).toThrow(WorkhorseValidationError);
  });
});
