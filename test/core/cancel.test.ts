/**
 * Cancellation: immediate for jobs that are not running, a request acknowledged by the owner for
 * running ones, and a result that arrives after the request is refused.
 */
import { randomUUID } from 'node:crypto';
import { JobCanceledError, Worker, type WorkerEvent } from '../../lib/core';
import { claim, claimOne } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

interface OutcomeRow {
  state: string;
  result: unknown;
  error: { name: string; message: string } | null;
  final_attempt: number;
  worker_id: string | null;
}

interface EventRow {
  kind: string;
  attempt: number | null;
  worker_id: string | null;
  data: Record<string, unknown> | null;
}

const { db, queue, admin } = useTestDatabase();

const WORKER = 'cancel-test-worker';

async function outcome(id: string): Promise<OutcomeRow | undefined> {
  const { rows } = await db.pool.query<OutcomeRow>(
    'SELECT state, result, error, final_attempt, worker_id FROM workhorse.job_outcome WHERE job_id = $1',
    [id],
  );
  return rows[0];
}

async function hasRuntime(id: string): Promise<boolean> {
  return (await db.pool.query('SELECT 1 FROM workhorse.job_runtime WHERE job_id = $1', [id])).rowCount === 1;
}

async function events(id: string): Promise<EventRow[]> {
  const { rows } = await db.pool.query<EventRow>(
    'SELECT kind, attempt, worker_id, data FROM workhorse.job_event WHERE job_id = $1 ORDER BY id',
    [id],
  );
  return rows;
}

async function attemptOutcomes(id: string): Promise<[number, string][]> {
  const { rows } = await db.pool.query<{ attempt: number; outcome: string }>(
    'SELECT attempt, outcome FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
    [id],
  );
  return rows.map((r) => [r.attempt, r.outcome]);
}

describe('jobs that are not running', () => {
  it.each<[string, () => Promise<string>]>([
    ['ready', () => queue.enqueue('cancel.me', { n: 1 }, { queue: 'cancel-idle' })],
    ['scheduled', () => queue.enqueue('cancel.me', { n: 2 }, { queue: 'cancel-idle', runAt: new Date(Date.now() + 3_600_000) })],
  ])('a %s job is canceled at once', async (state, enqueue) => {
    const id = await enqueue();
    expect((await admin.getJob(id))?.state).toBe(state);

    expect(await admin.cancel(id, { reason: 'customer withdrew' })).toBe('canceled');

    expect(await hasRuntime(id)).toBe(false);
    expect(await outcome(id)).toEqual({
      state: 'canceled',
      result: null,
      error: { name: 'Canceled', message: 'customer withdrew' },
      final_attempt: 0,
      worker_id: null,
    });
    expect(await admin.getJob(id)).toMatchObject({ state: 'canceled', result: null, error: { name: 'Canceled' } });
    expect((await events(id)).map((e) => e.kind)).toEqual(['enqueued', 'canceled']);
    // No attempt was running, so none is closed.
    expect(await attemptOutcomes(id)).toEqual([]);

    // Promotion and claims no longer see it.
    await db.pool.query('SELECT workhorse.promote_v1()');
    expect(await claim(db.pool, 'cancel-idle', { workerId: WORKER, limit: 100 })).toEqual([]);
  });

  it('without a reason the envelope says it was canceled on request', async () => {
    const id = await queue.enqueue('cancel.me', null, { queue: 'cancel-no-reason' });
    expect(await admin.cancel(id)).toBe('canceled');
    expect((await outcome(id))?.error).toEqual({ name: 'Canceled', message: 'canceled on request' });
  });
});

describe('jobs that are running', () => {
  it("a running handler's ctx.signal aborts and the job ends canceled", async () => {
    const q = 'cancel-active';
    const id = await queue.enqueue('cancel.wait', null, { queue: q });
    const seen: WorkerEvent[] = [];
    let reason: unknown;
    let started = false;
    // leaseMs 1500 makes heartbeats (which carry the cancel request) run every 500 ms.
    const worker = new Worker(queue, { queues: [q], concurrency: 1, leaseMs: 1500, pollMs: 20, workerId: 'active-canceler' }).handle(
      'cancel.wait',
      (_payload: unknown, ctx) =>
        new Promise((_resolve, reject) => {
          started = true;
          const onAbort = () => {
            reason = ctx.signal.reason;
            reject(ctx.signal.reason);
          };
          if (ctx.signal.aborted) onAbort();
          else ctx.signal.addEventListener('abort', onAbort, { once: true });
        }),
    );
    worker.on((event) => seen.push(event));
    const running = worker.run();
    try {
      await waitFor(async () => started, 10_000, 'the handler to start');
      expect(await admin.cancel(id, { reason: 'operator said stop' })).toBe('cancel_requested');
      const requested = await admin.getJob(id);
      expect(requested).toMatchObject({ state: 'active', workerId: 'active-canceler' });
      expect(requested?.cancelRequestedAt).toBeInstanceOf(Date);
      // A second request while the first is pending changes nothing.
      expect(await admin.cancel(id)).toBe('cancel_requested');

      await waitFor(async () => (await outcome(id)) !== undefined, 10_000, 'the job to end');
      await waitFor(async () => seen.some((e) => e.name === 'job.canceled'), 5_000, 'the job.canceled event');
    } finally {
      await worker.stop();
      await running;
    }

    expect(reason).toBeInstanceOf(JobCanceledError);
    expect(await outcome(id)).toEqual({
      state: 'canceled',
      result: null,
      error: { name: 'Canceled', message: 'operator said stop' },
      final_attempt: 1,
      worker_id: 'active-canceler',
    });
    expect(await attemptOutcomes(id)).toEqual([[1, 'canceled']]);
    const kinds = (await events(id)).map((e) => e.kind);
    expect(kinds).toEqual(['enqueued', 'claimed', 'cancel_requested', 'canceled']);
    const names = seen.filter((e) => e.name.startsWith('job.')).map((e) => e.name);
    expect(names).toEqual(['job.claimed', 'job.canceled']);
    expect(seen.filter((e) => e.name === 'worker.error')).toEqual([]);
  });

  it('a handler that ignores the signal and returns a value still ends canceled, without its result', async () => {
    const q = 'cancel-ignored';
    const id = await queue.enqueue('cancel.ignore', null, { queue: q });
    const seen: WorkerEvent[] = [];
    let finish: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let started = false;
    const worker = new Worker(queue, { queues: [q], concurrency: 1, leaseMs: 1500, pollMs: 20 }).handle('cancel.ignore', async () => {
      started = true;
      await gate;
      return { charged: true };
    });
    worker.on((event) => seen.push(event));
    const running = worker.run();
    try {
      await waitFor(async () => started, 10_000, 'the handler to start');
      expect(await admin.cancel(id)).toBe('cancel_requested');
      finish();
      await waitFor(async () => (await outcome(id)) !== undefined, 10_000, 'the job to end');
    } finally {
      finish();
      await worker.stop();
      await running;
    }

    expect(await outcome(id)).toMatchObject({ state: 'canceled', result: null, error: { name: 'Canceled' } });
    expect(await admin.getJob(id)).toMatchObject({ state: 'canceled', result: null });
    expect(await attemptOutcomes(id)).toEqual([[1, 'canceled']]);
    expect(seen.map((e) => e.name)).toContain('job.canceled');
    expect(seen.map((e) => e.name)).not.toContain('job.succeeded');
  });

  it('completions recorded in one round trip each get their own answer: the canceled one among succeeded ones', async () => {
    const q = 'cancel-batch';
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push(await queue.enqueue('cancel.batch', { n }, { queue: q }));
    const [first, canceled, last] = ids;
    const seen: WorkerEvent[] = [];
    let finish: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let started = 0;
    const worker = new Worker(queue, { queues: [q], concurrency: 3, pollMs: 20 }).handle('cancel.batch', async (payload: { n: number }) => {
      started++;
      await gate;
      return { n: payload.n };
    });
    worker.on((event) => seen.push(event));
    const running = worker.run();
    try {
      await waitFor(async () => started === 3, 10_000, 'three handlers to start');
      expect(await admin.cancel(canceled)).toBe('cancel_requested');
      // All three handlers return in the same turn, so their completions share a round trip.
      finish();
      await waitFor(async () => (await db.pool.query('SELECT 1 FROM workhorse.job_outcome WHERE job_id = ANY ($1)', [ids])).rowCount === 3, 10_000, 'the jobs to end');
    } finally {
      finish();
      await worker.stop();
      await running;
    }

    const { rows } = await db.pool.query<{ finished_at: Date }>('SELECT DISTINCT finished_at FROM workhorse.job_outcome WHERE job_id = ANY ($1)', [ids]);
    expect(rows).toHaveLength(1);
    expect(await outcome(first)).toMatchObject({ state: 'succeeded', result: { n: 1 } });
    expect(await outcome(canceled)).toMatchObject({ state: 'canceled', result: null, error: { name: 'Canceled' } });
    expect(await outcome(last)).toMatchObject({ state: 'succeeded', result: { n: 3 } });
    const ended = seen.filter((e) => e.name === 'job.succeeded' || e.name === 'job.canceled');
    expect(ended.map((e) => [e.name, 'jobId' in e ? e.jobId : null]).sort()).toEqual(
      [
        ['job.canceled', canceled],
        ['job.succeeded', first],
        ['job.succeeded', last],
      ].sort(),
    );
  });

  it('complete_v1 after a cancel request is refused: the job ends canceled with no result', async () => {
    const q = 'cancel-then-complete';
    const id = await queue.enqueue('cancel.sql', null, { queue: q });
    const job = await claimOne(db.pool, q, { workerId: WORKER });

    const cancel = await db.pool.query<{ status: string }>('SELECT workhorse.cancel_v1($1, $2) AS status', [id, 'too late']);
    expect(cancel.rows[0].status).toBe('cancel_requested');
    // The owner hears about it on its next heartbeat; the lease is still renewed.
    const beat = await db.pool.query<{ status: string }>('SELECT status FROM workhorse.heartbeat_many_v1($1, $2::jsonb, 60000)', [
      WORKER,
      JSON.stringify([{ jobId: id, fence: Number(job.fence) }]),
    ]);
    expect(beat.rows.map((r) => r.status)).toEqual(['cancel_requested']);

    const complete = await db.pool.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status', [
      id,
      WORKER,
      job.fence,
      JSON.stringify({ shipped: true }),
    ]);
    expect(complete.rows[0].status).toBe('canceled');

    expect(await hasRuntime(id)).toBe(false);
    expect(await outcome(id)).toEqual({
      state: 'canceled',
      result: null,
      error: { name: 'Canceled', message: 'too late' },
      final_attempt: 1,
      worker_id: WORKER,
    });
    expect(await attemptOutcomes(id)).toEqual([[1, 'canceled']]);
    const last = (await events(id)).at(-1);
    expect(last).toMatchObject({ kind: 'canceled', attempt: 1, worker_id: WORKER, data: { resultRefused: true } });
  });

  it('acknowledge_cancel_v1 ends a job whose cancel was requested', async () => {
    const q = 'cancel-ack';
    const id = await queue.enqueue('cancel.sql', null, { queue: q });
    const job = await claimOne(db.pool, q, { workerId: WORKER });
    await db.pool.query('SELECT workhorse.cancel_v1($1)', [id]);
    const ack = await db.pool.query<{ status: string }>('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3) AS status', [
      id,
      WORKER,
      job.fence,
    ]);
    expect(ack.rows[0].status).toBe('canceled');
    expect(await outcome(id)).toMatchObject({ state: 'canceled', final_attempt: 1 });
    expect(await attemptOutcomes(id)).toEqual([[1, 'canceled']]);
  });

  it('acknowledge_cancel_v1 without a pending request is not_requested and changes nothing', async () => {
    const q = 'cancel-ack-none';
    const id = await queue.enqueue('cancel.sql', null, { queue: q });
    const job = await claimOne(db.pool, q, { workerId: WORKER });
    const before = await db.pool.query('SELECT * FROM workhorse.job_runtime WHERE job_id = $1', [id]);

    const ack = await db.pool.query<{ status: string }>('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3) AS status', [
      id,
      WORKER,
      job.fence,
    ]);
    expect(ack.rows[0].status).toBe('not_requested');

    const after = await db.pool.query('SELECT * FROM workhorse.job_runtime WHERE job_id = $1', [id]);
    expect(after.rows).toEqual(before.rows);
    expect(await outcome(id)).toBeUndefined();
    expect((await events(id)).map((e) => e.kind)).toEqual(['enqueued', 'claimed']);

    // From someone who does not own the job, the answer is stale.
    const stale = await db.pool.query<{ status: string }>('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3) AS status', [
      id,
      'not-the-owner',
      job.fence,
    ]);
    expect(stale.rows[0].status).toBe('stale');

    const done = await db.pool.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status', [
      id,
      WORKER,
      job.fence,
      '1',
    ]);
    expect(done.rows[0].status).toBe('succeeded');
  });
});

describe('jobs that cannot be canceled', () => {
  it('a terminal job answers already_terminal and nothing changes', async () => {
    const q = 'cancel-terminal';
    const id = await queue.enqueue('cancel.sql', null, { queue: q });
    const job = await claimOne(db.pool, q, { workerId: WORKER });
    await db.pool.query('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb)', [id, WORKER, job.fence, '{"ok":true}']);
    const outcomeBefore = await db.pool.query('SELECT * FROM workhorse.job_outcome WHERE job_id = $1', [id]);
    const eventsBefore = await events(id);

    expect(await admin.cancel(id, { reason: 'after the fact' })).toBe('already_terminal');

    const outcomeAfter = await db.pool.query('SELECT * FROM workhorse.job_outcome WHERE job_id = $1', [id]);
    expect(outcomeAfter.rows).toEqual(outcomeBefore.rows);
    expect(outcomeAfter.rows[0]).toMatchObject({ state: 'succeeded', result: { ok: true } });
    expect(await events(id)).toEqual(eventsBefore);
    expect(await hasRuntime(id)).toBe(false);

    // A job already canceled is terminal too.
    const other = await queue.enqueue('cancel.sql', null, { queue: q });
    expect(await admin.cancel(other)).toBe('canceled');
    expect(await admin.cancel(other)).toBe('already_terminal');
    expect((await events(other)).map((e) => e.kind)).toEqual(['enqueued', 'canceled']);
  });

  it('an unknown id answers not_found', async () => {
    const unknown = randomUUID();
    expect(await admin.cancel(unknown)).toBe('not_found');
    const viaSql = await db.pool.query<{ status: string }>('SELECT workhorse.cancel_v1($1) AS status', [unknown]);
    expect(viaSql.rows[0].status).toBe('not_found');
    const leftovers = await db.pool.query(
      'SELECT 1 FROM workhorse.job_event WHERE job_id = $1 UNION ALL SELECT 1 FROM workhorse.job_outcome WHERE job_id = $1',
      [unknown],
    );
    expect(leftovers.rowCount).toBe(0);
  });
});

describe('who canceled', () => {
  it('records the actor with the reason: in the envelope of a waiting job, in the request of a running one', async () => {
    const waiting = await queue.enqueue('cancel.actor', {}, { queue: 'cancel-actor' });
    expect(await admin.cancel(waiting, { actor: 'ops:ada', reason: 'duplicate order' })).toBe('canceled');
    expect((await outcome(waiting))?.error).toEqual({ name: 'Canceled', message: 'duplicate order', actor: 'ops:ada' });
    expect((await events(waiting)).map((e) => e.kind)).toEqual(['enqueued', 'canceled']);

    const running = await queue.enqueue('cancel.actor', {}, { queue: 'cancel-actor' });
    await claimOne(db.pool, 'cancel-actor', { workerId: WORKER });
    expect(await admin.cancel(running, { actor: 'ops:bob', reason: 'customer withdrew' })).toBe('cancel_requested');
    expect((await events(running)).find((e) => e.kind === 'cancel_requested')?.data).toEqual({ reason: 'customer withdrew', actor: 'ops:bob' });
    // Without an actor nothing more is recorded than before.
    const plain = await queue.enqueue('cancel.actor', {}, { queue: 'cancel-actor' });
    await admin.cancel(plain, { reason: 'plain' });
    expect((await outcome(plain))?.error).toEqual({ name: 'Canceled', message: 'plain' });
  });

  it('refuses an actor that is not a string of at most 200 characters, naming it', async () => {
    const id = await queue.enqueue('cancel.actor', {}, { queue: 'cancel-actor-bad' });
    await expect(admin.cancel(id, { actor: 'x'.repeat(201) })).rejects.toMatchObject({ field: 'actor' });
    await expect(admin.cancel(id, { actor: 5 as unknown as string })).rejects.toMatchObject({ field: 'actor' });
    expect(await hasRuntime(id)).toBe(true);
  });
});
