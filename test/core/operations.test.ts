/**
 * Operations: queue pause/resume, handler progress, dead letters and redrive, through the public
 * Admin and Worker API and, where the issue is the protocol itself, the SQL functions.
 */
import { randomUUID } from 'node:crypto';
import {
  InvalidCursorError,
  LeaseLostError,
  Worker,
  WorkhorseValidationError,
  type DeadLetterFilter,
  type HandlerContext,
  type JobSnapshot,
  type JsonValue,
  type TimelineEntry,
  type WorkerEvent,
} from '../../lib/core';
import { claim, claimOne, complete, forceExpire, type ClaimedJob, type Owner } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { gate, waitFor } from '../support/wait';

const { pool, queue, admin } = useTestDatabase({
  beforeDrop: async () => {
    // A test that failed half-way may have left a worker running; it must not keep jest alive.
    await Promise.all([...liveWorkers].map((w) => w.stop()));
  },
});
const liveWorkers = new Set<Worker>();

// ---- helpers ----------------------------------------------------------------------------------

function start(worker: Worker): { events: WorkerEvent[]; done: Promise<void> } {
  const events: WorkerEvent[] = [];
  worker.on((event) => events.push(event));
  liveWorkers.add(worker);
  const done = worker.run().finally(() => liveWorkers.delete(worker));
  return { events, done };
}

async function stopWorker(worker: Worker): Promise<void> {
  await worker.stop();
  liveWorkers.delete(worker);
}

async function dbNow(): Promise<Date> {
  return (await pool.query<{ now: Date }>('SELECT clock_timestamp() AS now')).rows[0].now;
}

async function count(table: string): Promise<number> {
  return (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM workhorse.${table}`)).rows[0].n;
}

/** Row counts that any write by a redrive would change. */
async function writeCounts(): Promise<Record<string, number>> {
  return {
    job: await count('job'),
    job_runtime: await count('job_runtime'),
    job_redrive: await count('job_redrive'),
    job_event: await count('job_event'),
    job_query: await count('job_query'),
  };
}

async function mustGet(id: string): Promise<JobSnapshot> {
  const job = await admin.getJob(id);
  if (job === null) throw new Error(`job ${id} not found`);
  return job;
}

async function timeline(id: string): Promise<TimelineEntry[]> {
  return (await admin.getJobTimeline(id, { limit: 1000 })).items;
}

async function setProgressSql(owner: Owner, value: JsonValue): Promise<string> {
  const { rows } = await pool.query<{ status: string }>(
    'SELECT workhorse.set_progress_v1($1, $2, $3, $4::jsonb) AS status',
    [owner.jobId, owner.workerId, owner.fence, JSON.stringify(value)],
  );
  return rows[0].status;
}

async function expectValidationError(promise: Promise<unknown>, field: string): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WorkhorseValidationError);
  expect((error as WorkhorseValidationError).field).toBe(field);
}

// Handlers fail with custom error classes; the stored envelope carries their `name`.
class PaymentDeclined extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PaymentDeclined';
  }
}

class CarrierDown extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CarrierDown';
  }
}

type ErrorName = 'PaymentDeclined' | 'CarrierDown' | null;

function throwNamed(name: ErrorName, message: string): void {
  if (name === 'PaymentDeclined') throw new PaymentDeclined(message);
  if (name === 'CarrierDown') throw new CarrierDown(message);
}

// ---- queue pause --------------------------------------------------------------------------------

describe('queue pause', () => {
  it('claim_many_v1 skips a paused queue while another queue of the same call is still claimed', async () => {
    const paused = 'pause-sql-a';
    const running = 'pause-sql-b';
    const pausedJob = await queue.enqueue('pause.sql', { q: 'a' }, { queue: paused, priority: 100 });
    const runningJob = await queue.enqueue('pause.sql', { q: 'b' }, { queue: running });
    await admin.pauseQueue(paused, { actor: 'ops' });

    const claimed = await claim(pool, [paused, running], { workerId: 'sql-worker', limit: 10 });
    // The paused job has the higher priority, so only the pause explains why it was not taken.
    expect(claimed.map((c) => c.jobId)).toEqual([runningJob]);
    expect(await mustGet(pausedJob)).toMatchObject({ state: 'ready', currentAttempt: 0, workerId: null });
    expect(await claim(pool, [paused], { workerId: 'sql-worker', limit: 10 })).toEqual([]);
    expect(await complete(pool, claimed[0])).toBe('succeeded');

    // Resumed, the same call takes it: it was claimable all along except for the pause.
    await admin.resumeQueue(paused, { actor: 'ops' });
    const again = await claim(pool, [paused, running], { workerId: 'sql-worker', limit: 10 });
    expect(again.map((c) => c.jobId)).toEqual([pausedJob]);
    expect(await complete(pool, again[0])).toBe('succeeded');
  });

  it('enqueue into a paused queue still works and the job waits as ready', async () => {
    const q = 'pause-enqueue';
    await admin.pauseQueue(q, { actor: 'ops', reason: 'incident' });
    const ids = await queue.enqueueMany([
      { type: 'pause.enqueue', payload: { n: 1 }, queue: q },
      { type: 'pause.enqueue', payload: { n: 2 }, queue: q },
    ]);
    const single = await queue.enqueue('pause.enqueue', { n: 3 }, { queue: q });
    for (const id of [...ids, single]) expect(await mustGet(id)).toMatchObject({ state: 'ready', queue: q });
    const info = (await admin.listQueues()).find((x) => x.queue === q);
    expect(info).toMatchObject({ paused: true, ready: 3, active: 0 });

    // A worker on this queue alone claims nothing.
    let calls = 0;
    const worker = new Worker(queue, { queues: [q] }).handle('pause.enqueue', async () => {
      calls += 1;
    });
    expect(await worker.runOnce()).toBe(0);
    expect(calls).toBe(0);
    for (const id of [...ids, single]) expect(await mustGet(id)).toMatchObject({ state: 'ready', currentAttempt: 0 });

    await admin.resumeQueue(q);
    expect(await worker.runOnce()).toBe(3);
    expect(calls).toBe(3);
  });

  it('a running Worker runs nothing from a paused queue, and resumeQueue wakes it without a restart', async () => {
    const paused = 'pause-worker-a';
    const probe = 'pause-worker-b';
    await admin.pauseQueue(paused, { actor: 'ops' });
    const since = await dbNow();
    const ran: string[] = [];
    // pollMs is 600 s: within this test only a NOTIFY can make the worker claim again.
    const worker = new Worker(queue, { queues: [paused, probe], pollMs: 600_000, concurrency: 4 })
      .handle('pause.job', async (_p: unknown, ctx: HandlerContext) => {
        ran.push(ctx.jobId);
        return 'done';
      });
    const s = start(worker);
    try {
      await waitFor(
        async () =>
          (
            await pool.query(
              "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN workhorse_jobs' AND backend_start >= $1",
              [since],
            )
          ).rowCount === 1,
        10_000,
        'the worker to LISTEN',
      );
      const pausedJob = await queue.enqueue('pause.job', {}, { queue: paused });
      // Claims are serialised, so the claim that takes this probe job ran after the paused job
      // existed, over both queues.
      const probeJob = await queue.enqueue('pause.job', {}, { queue: probe });
      await waitFor(async () => (await mustGet(probeJob)).state === 'succeeded', 10_000, 'the probe job to succeed');
      expect(ran).toEqual([probeJob]);
      expect(await mustGet(pausedJob)).toMatchObject({ state: 'ready', currentAttempt: 0 });

      await admin.resumeQueue(paused, { actor: 'ops', reason: 'incident over' });
      await waitFor(async () => (await mustGet(pausedJob)).state === 'succeeded', 10_000, 'the resumed job to succeed');
      expect(ran).toEqual([probeJob, pausedJob]);
      expect(s.events.some((e) => e.name === 'worker.error')).toBe(false);
    } finally {
      await stopWorker(worker);
      await s.done;
    }
  });

  it('a job already running when its queue is paused still finishes and succeeds', async () => {
    const q = 'pause-running';
    const release = gate();
    const started = gate();
    const worker = new Worker(queue, { queues: [q], concurrency: 1 }).handle('pause.long', async () => {
      started.open();
      await release.promise;
      return { finished: true };
    });
    const id = await queue.enqueue('pause.long', {}, { queue: q });
    const run = worker.runOnce();
    try {
      await started.promise;
      const info = await admin.pauseQueue(q, { actor: 'ops', reason: 'drain' });
      expect(info).toMatchObject({ paused: true, active: 1, ready: 0 });
      expect(await mustGet(id)).toMatchObject({ state: 'active' });
    } finally {
      release.open();
    }
    expect(await run).toBe(1);
    expect(await mustGet(id)).toMatchObject({ state: 'succeeded', result: { finished: true } });
    expect((await admin.listQueues()).find((x) => x.queue === q)).toMatchObject({ paused: true, active: 0 });
    await admin.resumeQueue(q);
  });

  it('listQueues shows pause state, actor, reason, time and live counts per queue', async () => {
    const q = 'lq-main';
    const idle = 'lq-empty';
    const plain = 'lq-plain';
    // A succeeded job must not be counted; an active, 2 ready and 1 scheduled must.
    const doneId = await queue.enqueue('lq.job', {}, { queue: q, priority: 90 });
    const done = await claimOne(pool, q, { workerId: 'lq-worker' });
    expect(done.jobId).toBe(doneId);
    expect(await complete(pool, done)).toBe('succeeded');
    const activeId = await queue.enqueue('lq.job', {}, { queue: q, priority: 50 });
    const active = await claimOne(pool, q, { workerId: 'lq-worker' });
    expect(active.jobId).toBe(activeId);
    await queue.enqueueMany([
      { type: 'lq.job', payload: {}, queue: q },
      { type: 'lq.job', payload: {}, queue: q },
      { type: 'lq.job', payload: {}, queue: q, runAt: new Date(Date.now() + 3_600_000) },
    ]);
    await queue.enqueue('lq.job', {}, { queue: plain });

    const before = await dbNow();
    const returned = await admin.pauseQueue(q, { actor: 'alice', reason: 'db migration' });
    const emptyReturned = await admin.pauseQueue(idle, { actor: 'bob' });
    const after = await dbNow();

    expect(returned).toMatchObject({
      queue: q,
      paused: true,
      changedBy: 'alice',
      reason: 'db migration',
      ready: 2,
      scheduled: 1,
      active: 1,
      blocked: 0,
    });
    expect(returned.changedAt).toBeInstanceOf(Date);
    expect((returned.changedAt as Date).getTime()).toBeGreaterThanOrEqual(before.getTime());
    expect((returned.changedAt as Date).getTime()).toBeLessThanOrEqual(after.getTime());

    const list = await admin.listQueues();
    const names = list.map((x) => x.queue);
    expect(names).toEqual([...names].sort());
    expect(list.find((x) => x.queue === q)).toEqual(returned);
    // A paused queue without any job is listed too.
    expect(list.find((x) => x.queue === idle)).toEqual(emptyReturned);
    expect(emptyReturned).toEqual({
      changedAt: expect.any(Date),
      queue: idle,
      paused: true,
      changedBy: 'bob',
      loginRole: expect.any(String),
      reason: null,
      ready: 0,
      scheduled: 0,
      active: 0,
      blocked: 0,
      concurrency: null,
      rateLimit: null,
      perKey: null,
      policyChangedAt: null,
      policyChangedBy: null,
      policyLoginRole: null,
      policyReason: null,
    });
    // A queue that was never paused is listed for its live jobs, with no pause record.
    expect(list.find((x) => x.queue === plain)).toEqual({
      queue: plain,
      paused: false,
      changedAt: null,
      changedBy: null,
      loginRole: null,
      reason: null,
      ready: 1,
      scheduled: 0,
      active: 0,
      blocked: 0,
      concurrency: null,
      rateLimit: null,
      perKey: null,
      policyChangedAt: null,
      policyChangedBy: null,
      policyLoginRole: null,
      policyReason: null,
    });

    const resumed = await admin.resumeQueue(q, { actor: 'carol', reason: 'migration done' });
    expect(resumed).toMatchObject({ queue: q, paused: false, changedBy: 'carol', reason: 'migration done', ready: 2, active: 1 });
    expect((resumed.changedAt as Date).getTime()).toBeGreaterThanOrEqual((returned.changedAt as Date).getTime());
    expect((await admin.listQueues()).find((x) => x.queue === q)).toEqual(resumed);

    expect(await complete(pool, active)).toBe('succeeded');
    expect((await admin.listQueues()).find((x) => x.queue === q)).toMatchObject({ active: 0, ready: 2, scheduled: 1 });
  });

  it('pause is idempotent: a second pause keeps the first actor, reason and time', async () => {
    const q = 'pause-idem';
    const first = await admin.pauseQueue(q, { actor: 'alice', reason: 'first' });
    const rawFirst = (await pool.query('SELECT changed_at::text AS at FROM workhorse.queue_control WHERE queue = $1', [q])).rows[0];
    // Let the database clock move on, so a rewrite would show a different time.
    await waitFor(
      async () =>
        (
          await pool.query<{ ok: boolean }>("SELECT clock_timestamp() > $1::timestamptz + interval '2 ms' AS ok", [
            rawFirst.at,
          ])
        ).rows[0].ok,
      5000,
      'the clock to move',
    );
    const second = await admin.pauseQueue(q, { actor: 'bob', reason: 'second' });
    expect(second).toEqual(first);
    expect(second).toMatchObject({ paused: true, changedBy: 'alice', reason: 'first' });
    const rawSecond = (await pool.query('SELECT changed_at::text AS at FROM workhorse.queue_control WHERE queue = $1', [q])).rows[0];
    expect(rawSecond).toEqual(rawFirst);

    // After a resume, a new pause is a new change with its own actor.
    await admin.resumeQueue(q, { actor: 'carol' });
    const third = await admin.pauseQueue(q, { actor: 'dave', reason: 'third' });
    expect(third).toMatchObject({ paused: true, changedBy: 'dave', reason: 'third' });
    expect((third.changedAt as Date).getTime()).toBeGreaterThan((first.changedAt as Date).getTime());
    await admin.resumeQueue(q);
  });

  it('refuses a bad queue name or an oversized actor/reason', async () => {
    await expectValidationError(admin.pauseQueue('bad queue!'), 'queue');
    await expectValidationError(admin.pauseQueue('ok-q', { actor: 'a'.repeat(201) }), 'actor');
    await expectValidationError(admin.resumeQueue('ok-q', { reason: 'r'.repeat(1001) }), 'reason');
    expect((await admin.listQueues()).some((x) => x.queue === 'ok-q')).toBe(false);
  });
});

// ---- progress -----------------------------------------------------------------------------------

describe('progress', () => {
  it('is visible while the job runs, replaced by a second call, and kept after success', async () => {
    const q = 'progress-run';
    const step1 = gate();
    const step2 = gate();
    const worker = new Worker(queue, { queues: [q], concurrency: 1 }).handle('progress.job', async (_p: unknown, ctx: HandlerContext) => {
      await ctx.setProgress({ done: 1, total: 3, phase: 'download' });
      await step1.promise;
      await ctx.setProgress({ done: 2 });
      await step2.promise;
      return 'ok';
    });
    const id = await queue.enqueue('progress.job', {}, { queue: q });
    expect((await mustGet(id)).progress).toBeNull();
    const run = worker.runOnce();
    try {
      const first = await waitFor(async () => {
        const job = await mustGet(id);
        return job.progress !== null ? job : undefined;
      }, 10_000, 'the first progress');
      expect(first).toMatchObject({ state: 'active', progress: { done: 1, total: 3, phase: 'download' } });
      step1.open();
      const second = await waitFor(async () => {
        const job = await mustGet(id);
        return (job.progress as { done?: number } | null)?.done === 2 ? job : undefined;
      }, 10_000, 'the second progress');
      // Replaced, not merged.
      expect(second).toMatchObject({ state: 'active' });
      expect(second.progress).toEqual({ done: 2 });
    } finally {
      step1.open();
      step2.open();
    }
    expect(await run).toBe(1);
    expect(await mustGet(id)).toMatchObject({ state: 'succeeded', result: 'ok', progress: { done: 2 } });
    const listed = (await admin.listJobs({ queue: q })).items.find((j) => j.id === id);
    expect(listed?.progress).toEqual({ done: 2 });
  });

  it('is kept on a failed job too', async () => {
    const q = 'progress-fail';
    const worker = new Worker(queue, { queues: [q] }).handle('progress.fail', async (_p: unknown, ctx: HandlerContext) => {
      await ctx.setProgress({ reached: 'step 7' });
      throw new CarrierDown('gave up at step 7');
    });
    const id = await queue.enqueue('progress.fail', {}, { queue: q, maxAttempts: 1 });
    expect(await worker.runOnce()).toBe(1);
    expect(await mustGet(id)).toMatchObject({ state: 'failed', progress: { reached: 'step 7' }, error: { name: 'CarrierDown' } });
  });

  it('refuses more than 64 KiB of JSON with WorkhorseValidationError and keeps the last value', async () => {
    const q = 'progress-size';
    const exact = 'y'.repeat(65534); // JSON "yyy...": exactly 65536 bytes
    const caught: unknown[] = [];
    const worker = new Worker(queue, { queues: [q] }).handle('progress.big', async (_p: unknown, ctx: HandlerContext) => {
      await ctx.setProgress(exact);
      for (const tooBig of ['x'.repeat(65535), { blob: 'z'.repeat(70_000) }, 'é'.repeat(40_000)]) {
        await ctx.setProgress(tooBig).catch((e: unknown) => caught.push(e));
      }
      return 'done';
    });
    const id = await queue.enqueue('progress.big', {}, { queue: q });
    expect(await worker.runOnce()).toBe(1);
    // 'é' is two bytes in UTF-8: 40 000 of them are under 65 536 characters but over 64 KiB.
    expect(caught).toHaveLength(3);
    for (const error of caught) {
      expect(error).toBeInstanceOf(WorkhorseValidationError);
      expect((error as WorkhorseValidationError).field).toBe('progress');
    }
    expect(await mustGet(id)).toMatchObject({ state: 'succeeded', progress: exact });
  });

  it('set_progress_v1 enforces the 64 KiB limit itself', async () => {
    const q = 'progress-size-sql';
    const id = await queue.enqueue('progress.sql', {}, { queue: q });
    const c = await claimOne(pool, q, { workerId: 'size-worker' });
    expect(c.jobId).toBe(id);
    expect(await setProgressSql(c, 'y'.repeat(65534))).toBe('saved');
    const error = await setProgressSql(c, 'x'.repeat(65535)).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'P1001', column: 'progress' });
    expect((await mustGet(id)).progress).toBe('y'.repeat(65534));
    expect(await complete(pool, c)).toBe('succeeded');
  });

  it('a stale write is rejected: the old owner gets `stale` and the new owner’s progress stays', async () => {
    const q = 'progress-stale';
    const id = await queue.enqueue('progress.stale', {}, { queue: q, maxAttempts: 3 });
    const a = await claimOne(pool, q, { workerId: 'worker-A' });
    expect(a.jobId).toBe(id);
    expect(await setProgressSql(a, { by: 'A', n: 1 })).toBe('saved');

    await forceExpire(pool, id);
    // Other tests' jobs are never left with an expired lease, so this only recovers ours.
    const recovered = (await pool.query<{ n: number }>('SELECT workhorse.recover_expired_v1(1000) AS n')).rows[0].n;
    expect(recovered).toBeGreaterThanOrEqual(1);
    expect(await mustGet(id)).toMatchObject({ state: 'ready', currentAttempt: 1 });

    const b = await claimOne(pool, q, { workerId: 'worker-B' });
    expect(b.jobId).toBe(id);
    expect(BigInt(b.fence)).toBeGreaterThan(BigInt(a.fence));
    expect(await setProgressSql(b, { by: 'B', n: 1 })).toBe('saved');

    expect(await setProgressSql(a, { by: 'A', n: 2 })).toBe('stale');
    // B's own id with A's fence is just as stale.
    expect(await setProgressSql({ ...a, workerId: 'worker-B' }, { by: 'A', n: 3 })).toBe('stale');
    expect(await mustGet(id)).toMatchObject({ state: 'active', workerId: 'worker-B', progress: { by: 'B', n: 1 } });

    expect(await complete(pool, b, 'B finished')).toBe('succeeded');
    expect(await mustGet(id)).toMatchObject({ state: 'succeeded', progress: { by: 'B', n: 1 } });
  });

  it('a handler whose lease was lost gets LeaseLostError from setProgress, and nothing is written', async () => {
    const q = 'progress-lost';
    const started = gate();
    const proceed = gate();
    let caught: unknown;
    let abortedAfter = false;
    const worker = new Worker(queue, { queues: [q], concurrency: 1, leaseMs: 60_000 }).handle(
      'progress.lost',
      async (_p: unknown, ctx: HandlerContext) => {
        await ctx.setProgress({ by: 'worker', step: 1 });
        started.open();
        await proceed.promise;
        try {
          await ctx.setProgress({ by: 'worker', step: 2 });
        } catch (error) {
          caught = error;
        }
        abortedAfter = ctx.signal.aborted;
        return 'should not be recorded';
      },
    );
    const events: WorkerEvent[] = [];
    worker.on((e) => events.push(e));
    const id = await queue.enqueue('progress.lost', {}, { queue: q, maxAttempts: 3 });
    const run = worker.runOnce();
    let b: ClaimedJob | undefined;
    try {
      await started.promise;
      // The lease is taken away behind the worker's back: expired, recovered, claimed by B.
      await forceExpire(pool, id);
      await pool.query('SELECT workhorse.recover_expired_v1(1000)');
      b = await claimOne(pool, q, { workerId: 'worker-B' });
      expect(b.jobId).toBe(id);
      expect(await setProgressSql(b, { by: 'B' })).toBe('saved');
    } finally {
      proceed.open();
    }
    await run;
    expect(caught).toBeInstanceOf(LeaseLostError);
    expect((caught as LeaseLostError).jobId).toBe(id);
    expect(abortedAfter).toBe(true);
    expect(events.some((e) => e.name === 'job.lease_lost' && e.jobId === id)).toBe(true);
    expect(events.some((e) => e.name === 'job.succeeded')).toBe(false);
    expect(await mustGet(id)).toMatchObject({ state: 'active', workerId: 'worker-B', progress: { by: 'B' }, result: null });

    expect(await complete(pool, b as ClaimedJob)).toBe('succeeded');
  });
});

// ---- dead letters -------------------------------------------------------------------------------

describe('dead letters', () => {
  const EAST = 'dl-east';
  const WEST = 'dl-west';
  const CHARGE = 'dl.charge';
  const SHIP = 'dl.ship';

  interface Spec {
    queue: string;
    type: string;
    error: ErrorName;
  }
  interface Made extends Spec {
    id: string;
    batch: 'A' | 'B';
  }

  // Every queue x type x error combination fails once, half before and half after `boundary`.
  const batchA: Spec[] = [
    { queue: EAST, type: CHARGE, error: 'PaymentDeclined' },
    { queue: WEST, type: SHIP, error: 'CarrierDown' },
    { queue: EAST, type: SHIP, error: 'PaymentDeclined' },
    { queue: WEST, type: CHARGE, error: 'CarrierDown' },
    { queue: EAST, type: CHARGE, error: null },
  ];
  const batchB: Spec[] = [
    { queue: EAST, type: CHARGE, error: 'CarrierDown' },
    { queue: WEST, type: SHIP, error: 'PaymentDeclined' },
    { queue: EAST, type: SHIP, error: 'CarrierDown' },
    { queue: WEST, type: CHARGE, error: 'PaymentDeclined' },
    { queue: WEST, type: SHIP, error: null },
  ];

  let failed: Made[] = [];
  let succeeded: string[] = [];
  let boundary: Date;

  async function runBatch(specs: Spec[], batch: 'A' | 'B'): Promise<void> {
    const handler = async (payload: { error: ErrorName }) => {
      throwNamed(payload.error, `batch ${batch} failure`);
      return 'fine';
    };
    const worker = new Worker(queue, { queues: [EAST, WEST], concurrency: 10 }).handle(CHARGE, handler).handle(SHIP, handler);
    const ids = await queue.enqueueMany(
      specs.map((s) => ({ type: s.type, queue: s.queue, payload: { error: s.error }, maxAttempts: 1 })),
    );
    expect(await worker.runOnce()).toBe(specs.length);
    specs.forEach((s, i) => {
      if (s.error === null) succeeded.push(ids[i]);
      else failed.push({ ...s, id: ids[i], batch });
    });
  }

  beforeAll(async () => {
    failed = [];
    succeeded = [];
    await runBatch(batchA, 'A');
    // A boundary on a whole millisecond (what a Date can carry) strictly after every batch-A
    // finish; batch B starts only once the database clock has passed it.
    boundary = (
      await pool.query<{ b: Date }>(
        `SELECT date_trunc('milliseconds', max(finished_at)) + interval '1 millisecond' AS b
         FROM workhorse.job_outcome WHERE job_id = ANY ($1::uuid[])`,
        [failed.map((f) => f.id)],
      )
    ).rows[0].b;
    await waitFor(
      async () => (await pool.query<{ ok: boolean }>('SELECT clock_timestamp() > $1::timestamptz AS ok', [boundary])).rows[0].ok,
      5000,
      'the clock to pass the boundary',
    );
    await runBatch(batchB, 'B');
  });

  /** Independent reading of the raw tables: the failed outcomes a filter selects, newest first. */
  async function oracle(filter: DeadLetterFilter): Promise<string[]> {
    const { rows } = await pool.query<{ job_id: string }>(
      `SELECT o.job_id FROM workhorse.job_outcome o JOIN workhorse.job j ON j.id = o.job_id
       WHERE o.state = 'failed'
         AND ($1::text IS NULL OR o.queue = $1) AND ($2::text IS NULL OR j.type = $2)
         AND ($3::text IS NULL OR o.error ->> 'name' = $3)
         AND ($4::timestamptz IS NULL OR o.finished_at >= $4) AND ($5::timestamptz IS NULL OR o.finished_at < $5)
       ORDER BY o.finished_at DESC, o.job_id DESC`,
      [filter.queue ?? null, filter.type ?? null, filter.errorName ?? null, filter.finishedAfter ?? null, filter.finishedBefore ?? null],
    );
    return rows.map((r) => r.job_id);
  }

  async function pageAll(filter: DeadLetterFilter, limit: number): Promise<{ ids: string[]; pages: number }> {
    const ids: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const page = await admin.listDeadLetters({ ...filter, limit, cursor });
      pages += 1;
      expect(page.items.length).toBeLessThanOrEqual(limit);
      ids.push(...page.items.map((j) => j.id));
      if (page.nextCursor === null) return { ids, pages };
      if (pages > 100) throw new Error('paging does not end');
      cursor = page.nextCursor;
    }
  }

  it('lists only failed jobs, newest first, with their final error and the snapshot fields', async () => {
    const page = await admin.listDeadLetters({ limit: 1000 });
    const ids = page.items.map((j) => j.id);
    expect(page.nextCursor).toBeNull();
    expect(ids).toEqual(await oracle({}));
    for (const f of failed) expect(ids).toContain(f.id);
    for (const s of succeeded) expect(ids).not.toContain(s);
    for (const item of page.items) expect(item.state).toBe('failed');
    for (let i = 1; i < page.items.length; i += 1) {
      expect((page.items[i - 1].finishedAt as Date).getTime()).toBeGreaterThanOrEqual((page.items[i].finishedAt as Date).getTime());
    }
    for (const f of failed) {
      const item = page.items.find((j) => j.id === f.id) as JobSnapshot;
      expect(item).toMatchObject({
        queue: f.queue,
        type: f.type,
        payload: { error: f.error },
        currentAttempt: 1,
        maxAttempts: 1,
        error: { name: f.error, message: `batch ${f.batch} failure` },
        redrivenFrom: null,
        redrivenTo: [],
      });
    }
  });

  interface FilterCase {
    name: string;
    filter: () => DeadLetterFilter;
    matches: (m: Made) => boolean;
    /** The filter names things only this describe uses: the result is exactly our matches. */
    exact: boolean;
  }

  const cases: FilterCase[] = [
    { name: 'queue', filter: () => ({ queue: EAST }), matches: (m) => m.queue === EAST, exact: true },
    { name: 'type', filter: () => ({ type: SHIP }), matches: (m) => m.type === SHIP, exact: true },
    {
      name: 'errorName',
      filter: () => ({ errorName: 'PaymentDeclined' }),
      matches: (m) => m.error === 'PaymentDeclined',
      exact: false,
    },
    { name: 'finishedAfter', filter: () => ({ finishedAfter: boundary }), matches: (m) => m.batch === 'B', exact: false },
    { name: 'finishedBefore', filter: () => ({ finishedBefore: boundary }), matches: (m) => m.batch === 'A', exact: false },
    {
      name: 'queue + type + errorName',
      filter: () => ({ queue: WEST, type: CHARGE, errorName: 'CarrierDown' }),
      matches: (m) => m.queue === WEST && m.type === CHARGE && m.error === 'CarrierDown',
      exact: true,
    },
    {
      name: 'queue + finishedAfter',
      filter: () => ({ queue: EAST, finishedAfter: boundary }),
      matches: (m) => m.queue === EAST && m.batch === 'B',
      exact: true,
    },
    {
      name: 'type + errorName + finishedBefore',
      filter: () => ({ type: CHARGE, errorName: 'PaymentDeclined', finishedBefore: boundary }),
      matches: (m) => m.type === CHARGE && m.error === 'PaymentDeclined' && m.batch === 'A',
      exact: true,
    },
    {
      name: 'finishedAfter + finishedBefore (an empty window)',
      filter: () => ({ queue: WEST, finishedAfter: boundary, finishedBefore: boundary }),
      matches: () => false,
      exact: true,
    },
  ];

  it.each(cases)('filters by $name, and pages of 2 concatenate to the full list', async ({ filter, matches, exact }) => {
    const f = filter();
    const full = await admin.listDeadLetters({ ...f, limit: 1000 });
    const ids = full.items.map((j) => j.id);
    const mine = failed.filter(matches).map((m) => m.id);
    const notMine = failed.filter((m) => !matches(m)).map((m) => m.id);

    expect(ids).toEqual(await oracle(f));
    if (exact) expect([...ids].sort()).toEqual([...mine].sort());
    for (const id of mine) expect(ids).toContain(id);
    for (const id of [...notMine, ...succeeded]) expect(ids).not.toContain(id);

    const paged = await pageAll(f, 2);
    expect(paged.ids).toEqual(ids);
    expect(new Set(paged.ids).size).toBe(paged.ids.length);
    expect(paged.pages).toBeGreaterThanOrEqual(Math.ceil(ids.length / 2));
  });

  it('the last page has nextCursor null, also when the items divide evenly into pages', async () => {
    // Four east dead letters: a page of 4 holds them all and is the last; so is the second page of 2.
    const first = await admin.listDeadLetters({ queue: EAST, limit: 4 });
    expect(first.items).toHaveLength(4);
    expect(first.nextCursor).toBeNull();
    const half = await admin.listDeadLetters({ queue: EAST, limit: 2 });
    const second = await admin.listDeadLetters({ queue: EAST, limit: 2, cursor: half.nextCursor as string });
    expect(second.items.map((j) => j.id)).toEqual(first.items.slice(2).map((j) => j.id));
    expect(second.nextCursor).toBeNull();
    const odd = await admin.listDeadLetters({ queue: EAST, limit: 3 });
    expect(odd.items).toHaveLength(3);
    const tail = await admin.listDeadLetters({ queue: EAST, limit: 3, cursor: odd.nextCursor as string });
    expect(tail.items).toHaveLength(1);
    expect(tail.nextCursor).toBeNull();
  });

  it('refuses a tampered or foreign cursor with InvalidCursorError', async () => {
    const first = await admin.listDeadLetters({ queue: EAST, limit: 2 });
    const cursor = first.nextCursor as string;
    expect(cursor).not.toBeNull();
    const decoded = Buffer.from(cursor, 'base64url').toString('utf8');
    expect(decoded.startsWith('dead:')).toBe(true);
    const jobsCursor = (await admin.listJobs({ queue: EAST, limit: 1 })).nextCursor as string;
    const enc = (text: string): string => Buffer.from(text, 'utf8').toString('base64url');
    const tampered = [
      'not a cursor',
      '',
      enc(`${decoded}' OR 1=1 --`),
      enc(decoded.replace(/^dead/, 'jobs')),
      enc(decoded.replace(/\/.*$/, '')),
      enc('dead:12345'),
      jobsCursor,
    ];
    for (const bad of tampered) {
      const error = await admin.listDeadLetters({ queue: EAST, limit: 2, cursor: bad }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidCursorError);
      expect((error as InvalidCursorError).field).toBe('cursor');
    }
    // A dead-letter cursor is no timeline or listJobs cursor either.
    const foreign = await admin.listJobs({ queue: EAST, limit: 1, cursor }).catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(InvalidCursorError);
    // The genuine cursor still works.
    expect((await admin.listDeadLetters({ queue: EAST, limit: 2, cursor })).items).toHaveLength(2);
  });

  // A cursor of the right shape whose values were altered must be refused before it reaches
  // PostgreSQL's casts (which would fail with a raw DatabaseError).
  async function alteredCursorError(alter: (decoded: string) => string): Promise<unknown> {
    const first = await admin.listDeadLetters({ queue: EAST, limit: 2 });
    const decoded = Buffer.from(first.nextCursor as string, 'base64url').toString('utf8');
    const bad = Buffer.from(alter(decoded), 'utf8').toString('base64url');
    return admin.listDeadLetters({ queue: EAST, limit: 2, cursor: bad }).catch((e: unknown) => e);
  }

  it('refuses a cursor whose time is altered into an impossible one (month 13, 99:99:99) with InvalidCursorError', async () => {
    const error = await alteredCursorError((d) => d.replace(/^dead:[^/]+/, 'dead:2024-13-45T99:99:99.000000Z'));
    expect(error).toBeInstanceOf(InvalidCursorError);
  });

  it('refuses a cursor whose job id is altered into 36 characters that are no UUID with InvalidCursorError', async () => {
    const error = await alteredCursorError((d) => d.replace(/\/.*$/, `/${'-'.repeat(36)}`));
    expect(error).toBeInstanceOf(InvalidCursorError);
  });

  it('refuses unknown filter keys, bad limits and bad dates', async () => {
    await expectValidationError(admin.listDeadLetters({ limit: 0 }), 'limit');
    await expectValidationError(admin.listDeadLetters({ limit: 1001 }), 'limit');
    await expectValidationError(admin.listDeadLetters({ states: ['failed'] } as unknown as DeadLetterFilter), 'states');
    await expectValidationError(admin.listDeadLetters({ finishedAfter: new Date(Number.NaN) }), 'finishedAfter');
    await expectValidationError(admin.listDeadLetters({ queue: 'no spaces allowed' }), 'queue');
  });
});

// ---- redrive ------------------------------------------------------------------------------------

describe('redrive', () => {
  const TYPE = 'rd.invoice';
  let broken = true;
  let fetches = 0;
  const attemptsSeen: number[] = [];
  // Each test has a queue of its own: redriven jobs wait there as ready and must not reach the
  // next test's worker.
  const worker = (q: string): Worker =>
    new Worker(queue, { queues: [q], concurrency: 10 }).handle(TYPE, async (payload: { invoice: string }, ctx: HandlerContext) => {
      attemptsSeen.push(ctx.attempt);
      const fetched = await ctx.checkpoint('fetch', () => {
        fetches += 1;
        return { rows: 3 };
      });
      await ctx.setProgress({ fetched: fetched.rows });
      if (broken) throw new PaymentDeclined(`card declined for ${payload.invoice}`);
      return { paid: payload.invoice, rows: fetched.rows };
    });

  const definition = (q: string) => ({
    queue: q,
    priority: 7,
    maxAttempts: 2,
    retryPolicy: { kind: 'fixed', delayMs: 0 } as const,
    tags: ['billing', 'eu'],
  });

  /** A dead letter that ran twice (a checkpoint stored on the first run) and failed for good. */
  async function deadLetter(q: string, invoice: string): Promise<string> {
    broken = true;
    const id = await queue.enqueue(TYPE, { invoice, lines: [1, 2, { sku: 'x' }] }, definition(q));
    expect(await worker(q).runOnce()).toBe(1); // attempt 1 fails, retried at once (fixed 0 ms)
    expect(await worker(q).runOnce()).toBe(1); // attempt 2 fails for good
    expect(await mustGet(id)).toMatchObject({ state: 'failed', currentAttempt: 2, error: { name: 'PaymentDeclined' } });
    return id;
  }

  async function outcomeRow(id: string): Promise<unknown> {
    return (
      await pool.query(
        `SELECT state, result, error, final_attempt, fence_token, worker_id, finished_at::text AS finished_at, progress
         FROM workhorse.job_outcome WHERE job_id = $1`,
        [id],
      )
    ).rows;
  }

  async function checkpointCount(id: string): Promise<number> {
    return (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM workhorse.job_checkpoint WHERE job_id = $1', [id])).rows[0].n;
  }

  it('creates a new ready job with the same definition, no checkpoints, lineage on both; the source is unchanged', async () => {
    const Q = 'rd-1';
    const source = await deadLetter(Q, 'inv-1');
    expect(await checkpointCount(source)).toBe(1);
    const sourceBefore = await mustGet(source);
    const outcomeBefore = await outcomeRow(source);

    const newId = await admin.redrive(source, { requestId: 'rd-req-1', actor: 'ops@example.com', reason: 'card updated' });
    expect(newId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(newId).not.toBe(source);

    const fresh = await mustGet(newId);
    expect(fresh).toMatchObject({
      type: TYPE,
      queue: Q,
      payload: sourceBefore.payload,
      priority: 7,
      maxAttempts: 2,
      retryPolicy: sourceBefore.retryPolicy,
      tags: ['billing', 'eu'],
      state: 'ready',
      currentAttempt: 0,
      finishedAt: null,
      result: null,
      error: null,
      progress: null,
      workerId: null,
      redrivenFrom: source,
      redrivenTo: [],
    });
    expect(sourceBefore.retryPolicy).toEqual({ kind: 'fixed', delayMs: 0 });
    expect(await checkpointCount(newId)).toBe(0);
    expect(await checkpointCount(source)).toBe(1);

    const sourceAfter = await mustGet(source);
    expect(sourceAfter.redrivenTo).toEqual([newId]);
    expect(sourceAfter.redrivenFrom).toBeNull();
    expect({ ...sourceAfter, redrivenTo: [] }).toEqual(sourceBefore);
    expect(await outcomeRow(source)).toEqual(outcomeBefore);

    const sourceEvents = (await timeline(source)).filter((e) => e.kind === 'redriven');
    expect(sourceEvents).toHaveLength(1);
    expect(sourceEvents[0].data).toEqual({ newJobId: newId, requestId: 'rd-req-1', actor: 'ops@example.com', reason: 'card updated' });
    const freshTimeline = await timeline(newId);
    const fromEvents = freshTimeline.filter((e) => e.kind === 'redriven_from');
    expect(fromEvents).toHaveLength(1);
    expect(fromEvents[0].data).toEqual({ sourceJobId: source, requestId: 'rd-req-1', actor: 'ops@example.com', reason: 'card updated' });
    expect(freshTimeline.some((e) => e.source === 'attempt')).toBe(false);
  });

  it('is idempotent per requestId; the same requestId for another source is refused', async () => {
    const source = await deadLetter('rd-2', 'inv-2');
    const other = await deadLetter('rd-2', 'inv-3');
    const first = await admin.redrive(source, { requestId: 'rd-req-2', actor: 'ops' });
    const before = await writeCounts();
    const repeat = await admin.redrive(source, { requestId: 'rd-req-2', actor: 'someone else', reason: 'retry of the call' });
    expect(repeat).toBe(first);
    expect(await writeCounts()).toEqual(before);
    expect((await mustGet(source)).redrivenTo).toEqual([first]);
    expect((await timeline(source)).filter((e) => e.kind === 'redriven')).toHaveLength(1);

    await expectValidationError(admin.redrive(other, { requestId: 'rd-req-2' }), 'requestId');
    expect(await writeCounts()).toEqual(before);
    expect((await mustGet(other)).redrivenTo).toEqual([]);

    await expectValidationError(admin.redrive(source, { requestId: '' }), 'requestId');
    await expectValidationError(admin.redrive(source, { requestId: 'r'.repeat(201) }), 'requestId');
  });

  it('refuses to redrive a succeeded, canceled, live or unknown job', async () => {
    broken = false;
    const succeededId = await queue.enqueue(TYPE, { invoice: 'ok' }, definition('rd-3'));
    expect(await worker('rd-3').runOnce()).toBe(1);
    expect(await mustGet(succeededId)).toMatchObject({ state: 'succeeded' });

    const canceledId = await queue.enqueue(TYPE, { invoice: 'c' }, { queue: 'rd-idle' });
    expect(await admin.cancel(canceledId)).toBe('canceled');
    const readyId = await queue.enqueue(TYPE, { invoice: 'r' }, { queue: 'rd-idle' });
    const activeId = await queue.enqueue(TYPE, { invoice: 'a' }, { queue: 'rd-active' });
    const active = await claimOne(pool, 'rd-active', { workerId: 'rd-worker' });
    expect(active.jobId).toBe(activeId);

    const before = await writeCounts();
    let n = 0;
    for (const id of [succeededId, canceledId, readyId, activeId, randomUUID()]) {
      n += 1;
      await expectValidationError(admin.redrive(id, { requestId: `rd-refused-${n}` }), 'jobId');
    }
    expect(await writeCounts()).toEqual(before);

    expect(await complete(pool, active)).toBe('succeeded');
    expect(await admin.cancel(readyId)).toBe('canceled');
  });

  it('the redriven job runs from attempt 1, redoes its checkpoint, and succeeds with a fixed handler', async () => {
    const source = await deadLetter('rd-4', 'inv-4');
    expect(fetches).toBeGreaterThan(0);
    const newId = await admin.redrive(source, { requestId: 'rd-req-4' });
    broken = false;
    fetches = 0;
    attemptsSeen.length = 0;
    expect(await worker('rd-4').runOnce()).toBe(1);
    expect(attemptsSeen).toEqual([1]);
    // No checkpoint came along, so the step ran again.
    expect(fetches).toBe(1);
    expect(await mustGet(newId)).toMatchObject({
      state: 'succeeded',
      currentAttempt: 1,
      result: { paid: 'inv-4', rows: 3 },
      progress: { fetched: 3 },
      redrivenFrom: source,
    });
    expect(await mustGet(source)).toMatchObject({ state: 'failed', error: { name: 'PaymentDeclined' }, redrivenTo: [newId] });
  });
});

// ---- redriveMany --------------------------------------------------------------------------------

describe('redriveMany', () => {
  const Q = 'rm-q';
  const TYPE = 'rm.job';
  let dead: string[] = []; // newest first
  let declined: string[] = [];
  let okId: string;

  beforeAll(async () => {
    const errors: ErrorName[] = ['PaymentDeclined', 'CarrierDown', 'PaymentDeclined', 'PaymentDeclined', null];
    const worker = new Worker(queue, { queues: [Q], concurrency: 10 }).handle(TYPE, async (payload: { error: ErrorName }) => {
      throwNamed(payload.error, 'bulk failure');
      return 'fine';
    });
    const ids = await queue.enqueueMany(errors.map((error, i) => ({ type: TYPE, queue: Q, payload: { error, i }, maxAttempts: 1 })));
    expect(await worker.runOnce()).toBe(errors.length);
    okId = ids[4];
    dead = (await admin.listDeadLetters({ queue: Q, limit: 1000 })).items.map((j) => j.id);
    expect([...dead].sort()).toEqual(ids.slice(0, 4).sort());
    declined = (await admin.listDeadLetters({ queue: Q, errorName: 'PaymentDeclined', limit: 1000 })).items.map((j) => j.id);
    expect(declined).toHaveLength(3);
  });

  it('dryRun writes nothing and lists exactly the matching dead letters, newest first', async () => {
    const before = await writeCounts();
    const all = await admin.redriveMany({ queue: Q }, { requestId: 'rm-dry', dryRun: true, actor: 'ops' });
    expect(all).toEqual(dead.map((id) => ({ sourceJobId: id, newJobId: null })));
    expect(all.map((r) => r.sourceJobId)).not.toContain(okId);

    const filtered = await admin.redriveMany({ queue: Q, errorName: 'PaymentDeclined' }, { requestId: 'rm-dry', dryRun: true });
    expect(filtered).toEqual(declined.map((id) => ({ sourceJobId: id, newJobId: null })));

    const limited = await admin.redriveMany({ queue: Q }, { requestId: 'rm-dry', dryRun: true, limit: 2 });
    expect(limited.map((r) => r.sourceJobId)).toEqual(dead.slice(0, 2));

    expect(await writeCounts()).toEqual(before);
    for (const id of dead) expect((await mustGet(id)).redrivenTo).toEqual([]);
    // A dry run reserves nothing: the same request id later does a real run.
  });

  it('a real run redrives up to limit; a repeat returns the same ids; another request skips what was redriven', async () => {
    const before = await writeCounts();
    const first = await admin.redriveMany({ queue: Q }, { requestId: 'rm-dry', limit: 3, actor: 'bulk-ops', reason: 'provider fixed' });
    expect(first.map((r) => r.sourceJobId)).toEqual(dead.slice(0, 3));
    const newIds = first.map((r) => r.newJobId);
    for (const id of newIds) expect(id).toEqual(expect.any(String));
    expect(new Set(newIds).size).toBe(3);
    const afterFirst = await writeCounts();
    expect(afterFirst.job).toBe(before.job + 3);
    expect(afterFirst.job_redrive).toBe(before.job_redrive + 3);

    for (const { sourceJobId, newJobId } of first) {
      const source = await mustGet(sourceJobId);
      const fresh = await mustGet(newJobId as string);
      expect(source).toMatchObject({ state: 'failed', redrivenTo: [newJobId] });
      expect(fresh).toMatchObject({
        state: 'ready',
        currentAttempt: 0,
        type: TYPE,
        queue: Q,
        payload: source.payload,
        redrivenFrom: sourceJobId,
      });
      const ev = (await timeline(sourceJobId)).find((e) => e.kind === 'redriven');
      expect(ev?.data).toMatchObject({ newJobId, actor: 'bulk-ops', reason: 'provider fixed' });
    }

    const repeat = await admin.redriveMany({ queue: Q }, { requestId: 'rm-dry', limit: 3, actor: 'bulk-ops' });
    expect(repeat).toEqual(first);
    expect(await writeCounts()).toEqual(afterFirst);

    // A different request: the three already redriven dead letters are skipped, only the fourth is left.
    const dryOther = await admin.redriveMany({ queue: Q }, { requestId: 'rm-other', dryRun: true });
    expect(dryOther).toEqual([{ sourceJobId: dead[3], newJobId: null }]);
    const other = await admin.redriveMany({ queue: Q }, { requestId: 'rm-other' });
    expect(other).toHaveLength(1);
    expect(other[0].sourceJobId).toBe(dead[3]);
    expect(newIds).not.toContain(other[0].newJobId);
    expect((await mustGet(dead[3])).redrivenTo).toEqual([other[0].newJobId]);
    expect((await writeCounts()).job).toBe(afterFirst.job + 1);

    // Nothing is left for a third request; the redriven jobs themselves are no dead letters.
    expect(await admin.redriveMany({ queue: Q }, { requestId: 'rm-third' })).toEqual([]);
    expect((await admin.listDeadLetters({ queue: Q, limit: 1000 })).items.map((j) => j.id)).toEqual(dead);

    // The redriven jobs run: a fixed handler makes them all succeed.
    const fixed = new Worker(queue, { queues: [Q], concurrency: 10 }).handle(TYPE, async () => 'fixed');
    expect(await fixed.runOnce()).toBe(4);
    for (const id of [...newIds, other[0].newJobId]) expect(await mustGet(id as string)).toMatchObject({ state: 'succeeded', result: 'fixed' });
  });

  it('refuses an unknown filter key, a bad limit or a missing requestId', async () => {
    const unknownKey = { queue: Q, states: ['failed'] } as unknown as DeadLetterFilter;
    await expectValidationError(admin.redriveMany(unknownKey, { requestId: 'x' }), 'states');
    await expectValidationError(admin.redriveMany({ queue: Q }, { requestId: 'x', limit: 0 }), 'limit');
    await expectValidationError(admin.redriveMany({ queue: Q }, { requestId: 'x', limit: 1001 }), 'limit');
    await expectValidationError(admin.redriveMany({ queue: Q }, { requestId: '' }), 'requestId');
    await expectValidationError(admin.redriveMany({ queue: Q }, { requestId: 'r'.repeat(161) }), 'requestId');
  });
});
