/**
 * Claiming: dispatch order (priority, then FIFO), which rows a claim may take, how many, the
 * isolation guard, what a claim writes, and exactly-once execution under competing workers.
 */
import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { fromPgError, IsolationError, Queue, Worker, type WorkerEvent } from '../../lib/core';
import { stateOf } from '../support/job-state';
import { claim } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { delay, waitFor } from '../support/wait';

interface ClaimRow {
  job_id: string;
  queue: string;
  type: string;
  attempt: number;
  fence_token: string;
  lease_expires_at: Date;
}

const CLAIM_SQL =
  'SELECT job_id, queue, type, attempt, fence_token, lease_expires_at FROM workhorse.claim_many_v1($1, $2, $3, $4)';

const { db, queue } = useTestDatabase();

// A mix where priorities interleave, repeat and arrive out of order, so neither plain FIFO nor a
// priority sort that ignores arrival order could produce the expected sequence.
const PRIORITIES = [0, 5, 10, 5, 0, 100, 10, 0, 5, 100, 1];

function expectedOrder(ids: string[]): string[] {
  return ids
    .map((id, arrival) => ({ id, arrival, priority: PRIORITIES[arrival] }))
    .sort((a, b) => b.priority - a.priority || a.arrival - b.arrival)
    .map((j) => j.id);
}

describe('claim order', () => {
  it('claims one at a time by priority (higher first), FIFO within a priority', async () => {
    const q = 'order-sql';
    const ids: string[] = [];
    for (const [i, priority] of PRIORITIES.entries()) {
      ids.push(await queue.enqueue('order.job', { i }, { queue: q, priority }));
    }

    const claimed: string[] = [];
    for (let n = 0; n < ids.length; n++) {
      const rows = await claim(db.pool, [q], { limit: 1 });
      expect(rows).toHaveLength(1);
      claimed.push(rows[0].jobId);
    }
    expect(await claim(db.pool, [q], { limit: 1 })).toEqual([]);
    expect(claimed).toEqual(expectedOrder(ids));
  });

  it('keeps input order as FIFO order for jobs of one enqueueMany batch', async () => {
    const q = 'order-batch';
    const ids = await queue.enqueueMany(PRIORITIES.map((priority, i) => ({ type: 'order.job', payload: { i }, queue: q, priority })));
    const claimed: string[] = [];
    for (let n = 0; n < ids.length; n++) claimed.push((await claim(db.pool, [q], { limit: 1 }))[0].jobId);
    expect(claimed).toEqual(expectedOrder(ids));
  });

  it('returns a multi-row claim in dispatch order, merging queues by priority then FIFO', async () => {
    const qa = 'order-merge-a';
    const qb = 'order-merge-b';
    const ids: string[] = [];
    for (const [i, priority] of PRIORITIES.entries()) {
      ids.push(await queue.enqueue('order.job', { i }, { queue: i % 2 === 0 ? qa : qb, priority }));
    }
    const rows = await claim(db.pool, [qa, qb], { limit: 100 });
    expect(rows.map((r) => r.jobId)).toEqual(expectedOrder(ids));
  });

  it('a Worker with concurrency 1 runs handlers in priority-then-FIFO order', async () => {
    const q = 'order-worker';
    const ids: string[] = [];
    for (const [i, priority] of PRIORITIES.entries()) {
      ids.push(await queue.enqueue('order.job', { i }, { queue: q, priority }));
    }

    const ran: string[] = [];
    const worker = new Worker(queue, { queues: [q], concurrency: 1, pollMs: 20, listen: false }).handle(
      'order.job',
      async (_payload: unknown, ctx) => {
        ran.push(ctx.jobId);
        await delay(1);
      },
    );
    const running = worker.run();
    try {
      await waitFor(async () => ran.length === ids.length, 30_000, 'every job to run');
      await waitFor(
        async () => (await db.pool.query('SELECT 1 FROM workhorse.job_runtime WHERE queue = $1', [q])).rowCount === 0,
        10_000,
        'every job to finish',
      );
    } finally {
      await worker.stop();
      await running;
    }
    expect(ran).toEqual(expectedOrder(ids));
  });
});

describe('what a claim may take', () => {
  it('takes only ready jobs of the requested queues', async () => {
    const q = 'eligible';
    const ready = await queue.enqueue('elig.job', { which: 'ready' }, { queue: q });
    const otherQueue = await queue.enqueue('elig.job', { which: 'other queue' }, { queue: 'eligible-other' });
    const scheduled = await queue.enqueue('elig.job', { which: 'scheduled' }, { queue: q, runAt: new Date(Date.now() + 3_600_000) });
    const active = await queue.enqueue('elig.job', { which: 'active' }, { queue: q, priority: 100 });
    expect((await claim(db.pool, [q], { limit: 1, workerId: 'someone-else' })).map((r) => r.jobId)).toEqual([active]);
    const finished = await queue.enqueue('elig.job', { which: 'canceled' }, { queue: q, priority: 100 });
    await db.pool.query('SELECT workhorse.cancel_v1($1)', [finished]);

    const rows = await claim(db.pool, [q], { limit: 100 });
    expect(rows.map((r) => r.jobId)).toEqual([ready]);

    expect(await stateOf(db.pool, otherQueue)).toBe('ready');
    expect(await stateOf(db.pool, scheduled)).toBe('scheduled');
    const owner = await db.pool.query<{ worker_id: string }>('SELECT worker_id FROM workhorse.job_runtime WHERE job_id = $1', [active]);
    expect(owner.rows[0].worker_id).toBe('someone-else');
    expect(await stateOf(db.pool, finished)).toBe('canceled');

    // A queue nobody enqueued to yields nothing rather than an error.
    expect(await claim(db.pool, ['eligible-nothing-here'], { limit: 10 })).toEqual([]);
  });

  it('never returns more jobs than its limit, across one or several queues', async () => {
    const qa = 'limit-a';
    const qb = 'limit-b';
    await queue.enqueueMany(Array.from({ length: 10 }, (_, i) => ({ type: 'limit.job', payload: { i }, queue: i < 5 ? qa : qb })));

    expect(await claim(db.pool, [qa], { limit: 3 })).toHaveLength(3);
    const remainingA = await db.pool.query("SELECT 1 FROM workhorse.job_runtime WHERE queue = $1 AND state = 'ready'", [qa]);
    expect(remainingA.rowCount).toBe(2);

    expect(await claim(db.pool, [qa, qb], { limit: 4 })).toHaveLength(4);
    const left = await db.pool.query<{ n: string }>(
      "SELECT count(*) AS n FROM workhorse.job_runtime WHERE queue = ANY ($1) AND state = 'ready'",
      [[qa, qb]],
    );
    expect(Number(left.rows[0].n)).toBe(3);
  });

  it('refuses a limit outside 1..1000 with a validation error naming the field', async () => {
    for (const limit of [0, 1001]) {
      const error = await claim(db.pool, ['limit-a'], { limit }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'P1001', column: 'limit' });
    }
  });

  it('a Worker asks for at most its free slots: never more running than its concurrency', async () => {
    const q = 'limit-worker';
    const ids = await queue.enqueueMany(Array.from({ length: 8 }, (_, i) => ({ type: 'limit.job', payload: { i }, queue: q })));

    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let inFlight = 0;
    let maxInFlight = 0;
    const worker = new Worker(queue, { queues: [q], concurrency: 3, pollMs: 20, listen: false }).handle('limit.job', async () => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await gate;
      inFlight--;
    });
    const running = worker.run();
    try {
      await waitFor(async () => inFlight === 3, 10_000, 'three handlers to start');
      // Give the worker room to over-claim if it were going to.
      await delay(300);
      const active = await db.pool.query("SELECT 1 FROM workhorse.job_runtime WHERE queue = $1 AND state = 'active'", [q]);
      expect(active.rowCount).toBe(3);
      release();
      await waitFor(
        async () => (await db.pool.query('SELECT 1 FROM workhorse.job_outcome WHERE queue = $1', [q])).rowCount === ids.length,
        20_000,
        'every job to finish',
      );
    } finally {
      release();
      await worker.stop();
      await running;
    }
    expect(maxInFlight).toBe(3);
  });
});

describe('isolation guard', () => {
  it.each(['REPEATABLE READ', 'SERIALIZABLE'])('refuses to claim at %s (SQLSTATE P1004) and claims nothing', async (level) => {
    const q = `iso-${level.replace(' ', '-').toLowerCase()}`;
    const id = await queue.enqueue('iso.job', null, { queue: q });
    const client = await db.pool.connect();
    try {
      await client.query(`BEGIN ISOLATION LEVEL ${level}`);
      const error = await client.query(CLAIM_SQL, [[q], 'iso-worker', 1, 60_000]).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'P1004' });
      // The same typed error in every SDK (docs/protocol.md, Errors).
      expect(fromPgError(error)).toBeInstanceOf(IsolationError);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await stateOf(db.pool, id)).toBe('ready');
  });

  it('claims inside an explicit READ COMMITTED transaction', async () => {
    const q = 'iso-read-committed';
    const id = await queue.enqueue('iso.job', null, { queue: q });
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL READ COMMITTED');
      const { rows } = await client.query<ClaimRow>(CLAIM_SQL, [[q], 'iso-worker', 1, 60_000]);
      expect(rows.map((r) => r.job_id)).toEqual([id]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await stateOf(db.pool, id)).toBe('active');
  });
});

describe('what a claim writes', () => {
  it('writes fence token, lease, worker id, attempt and a claimed event', async () => {
    const q = 'writes';
    const id = await queue.enqueue('writes.job', { hello: 'world' }, { queue: q });
    const workerId = `writer-${randomUUID()}`;
    const { rows } = await db.pool.query<ClaimRow & { payload: unknown; max_attempts: number }>(
      'SELECT * FROM workhorse.claim_many_v1($1, $2, $3, $4)',
      [[q], workerId, 10, 45_000],
    );
    expect(rows).toHaveLength(1);
    const claimed = rows[0];
    expect(claimed).toMatchObject({ job_id: id, queue: q, type: 'writes.job', payload: { hello: 'world' }, attempt: 1, max_attempts: 25 });
    expect(BigInt(claimed.fence_token)).toBeGreaterThan(0n);

    const runtime = await db.pool.query<{
      state: string;
      worker_id: string;
      fence_token: string;
      current_attempt: number;
      lease_expires_at: Date;
      lease_ms: string;
      started_matches: boolean;
    }>(
      `SELECT state, worker_id, fence_token, current_attempt, lease_expires_at,
              extract(epoch FROM lease_expires_at - heartbeat_at) * 1000 AS lease_ms,
              attempt_started_at = heartbeat_at AS started_matches
       FROM workhorse.job_runtime WHERE job_id = $1`,
      [id],
    );
    const r = runtime.rows[0];
    expect(r).toMatchObject({ state: 'active', worker_id: workerId, fence_token: claimed.fence_token, current_attempt: 1 });
    expect(Number(r.lease_ms)).toBe(45_000);
    expect(r.started_matches).toBe(true);
    expect(r.lease_expires_at.getTime()).toBe(claimed.lease_expires_at.getTime());

    const events = await db.pool.query<{ kind: string; attempt: number; worker_id: string | null; fence_token: string | null }>(
      'SELECT kind, attempt, worker_id, fence_token FROM workhorse.job_event WHERE job_id = $1 ORDER BY id',
      [id],
    );
    expect(events.rows).toEqual([
      { kind: 'enqueued', attempt: 0, worker_id: null, fence_token: null },
      { kind: 'claimed', attempt: 1, worker_id: workerId, fence_token: claimed.fence_token },
    ]);
  });

  it('a batch takes one block of sequence values: consecutive fences and event ids in claim order, attempts before terminal events', async () => {
    const q = 'blocks';
    const enqueued = await queue.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ type: 'block.job', payload: { i }, queue: q, priority: i })));
    const drawn = async () => BigInt((await db.pool.query<{ v: string }>('SELECT last_value AS v FROM workhorse.fence_seq')).rows[0].v);
    await queue.enqueue('block.job', null, { queue: 'blocks-warm-up' });
    expect(await claim(db.pool, ['blocks-warm-up'], { limit: 1 })).toHaveLength(1); // (so the sequence has been drawn from)
    const before = await drawn();
    const batch = await claim(db.pool, [q], { limit: 4 });
    // One draw for the whole batch: the sequence moved by one block, not by one value per job.
    expect((await drawn()) - before).toBe(1000n);
    // Claim order is priority order (3, 2, 1, 0); fences count up from the first in that order.
    expect(batch.map((r) => r.jobId)).toEqual([...enqueued].reverse());
    const fences = batch.map((r) => BigInt(r.fence));
    expect(fences).toEqual(fences.map((_, k) => fences[0] + BigInt(k)));
    const ids = batch.map((r) => r.jobId);
    const historyIds = async (table: 'job_event' | 'attempt_history', where: string) =>
      (
        await db.pool.query<{ job_id: string; id: string }>(
          `SELECT job_id, id FROM workhorse.${table} WHERE job_id = ANY ($1::uuid[]) AND ${where}`,
          [ids],
        )
      ).rows.reduce<Record<string, bigint>>((m, r) => ({ ...m, [r.job_id]: BigInt(r.id) }), {});
    const claimedIds = await historyIds('job_event', "kind = 'claimed'");
    expect(ids.map((id) => claimedIds[id])).toEqual(ids.map((_, k) => claimedIds[ids[0]] + BigInt(k)));

    const items = JSON.stringify(batch.map((r) => ({ jobId: r.jobId, fence: Number(r.fence), result: null })));
    const done = await db.pool.query<{ job_id: string; status: string }>('SELECT job_id, status FROM workhorse.complete_many_v1($1, $2::jsonb)', [
      batch[0].workerId,
      items,
    ]);
    expect(done.rows.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    const attemptIds = await historyIds('attempt_history', 'true');
    const endIds = await historyIds('job_event', "kind = 'succeeded'");
    expect(ids.map((id) => attemptIds[id])).toEqual(ids.map((_, k) => attemptIds[ids[0]] + BigInt(k)));
    expect(ids.map((id) => endIds[id])).toEqual(ids.map((_, k) => endIds[ids[0]] + BigInt(k)));
    // Every attempt row of the batch precedes every terminal event, and both follow the claims.
    expect(attemptIds[ids[3]]).toBeLessThan(endIds[ids[0]]);
    expect(claimedIds[ids[3]]).toBeLessThan(attemptIds[ids[0]]);
  });

  it('hands out strictly increasing fence tokens, including when a job is claimed again', async () => {
    const q = 'fences';
    await queue.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ type: 'fence.job', payload: { i }, queue: q })));

    const fences: bigint[] = [];
    for (let n = 0; n < 3; n++) fences.push(BigInt((await claim(db.pool, [q], { limit: 1 }))[0].fence));
    const batch = await claim(db.pool, [q], { limit: 3 });
    expect(batch).toHaveLength(3);
    const batchFences = batch.map((r) => BigInt(r.fence));
    expect(new Set(batchFences).size).toBe(3);
    fences.push(...batchFences.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);

    // Back to ready with no delay, then claimed again: the new owner's fence beats every earlier one.
    const first = batch[0];
    const failed = await db.pool.query<{ status: string }>(
      `SELECT status FROM workhorse.fail_v1($1, $2, $3, '{"name":"Error","message":"again"}'::jsonb, '{"retryDelayMs":0}'::jsonb)`,
      [first.jobId, first.workerId, first.fence],
    );
    expect(failed.rows[0].status).toBe('retry_scheduled');
    const again = await claim(db.pool, [q], { limit: 1, workerId: 'second-owner' });
    expect(again.map((r) => r.jobId)).toEqual([first.jobId]);
    expect(again[0].attempt).toBe(2);
    expect(BigInt(again[0].fence)).toBeGreaterThan(fences[fences.length - 1]);
  });
});

describe('competing workers', () => {
  const JOBS = 2000;

  it(`4 workers x 10 slots run each of ${JOBS} jobs exactly once, and all succeed`, async () => {
    const q = 'contended';
    const ids: string[] = [];
    for (let start = 0; start < JOBS; start += 1000) {
      ids.push(
        ...(await queue.enqueueMany(
          Array.from({ length: Math.min(1000, JOBS - start) }, (_, i) => ({ type: 'contended.job', payload: { n: start + i }, queue: q })),
        )),
      );
    }
    expect(new Set(ids).size).toBe(JOBS);

    const seen = new Map<string, string[]>();
    const errors: WorkerEvent[] = [];
    const pools: Pool[] = [];
    const workers: Worker[] = [];
    const runs: Promise<void>[] = [];
    try {
      for (let w = 0; w < 4; w++) {
        // Separate pools: each worker competes over its own connections, as separate processes would.
        const pool = new Pool({ connectionString: db.url, max: 6 });
        pool.on('error', () => undefined);
        pools.push(pool);
        const workerId = `contender-${w}`;
        const worker = new Worker(new Queue(pool), { queues: [q], concurrency: 10, pollMs: 50, workerId }).handle(
          'contended.job',
          async (_payload: unknown, ctx) => {
            const runsOfJob = seen.get(ctx.jobId) ?? [];
            runsOfJob.push(workerId);
            seen.set(ctx.jobId, runsOfJob);
            await delay(Math.random() * 3);
            return { by: workerId };
          },
        );
        worker.on((event) => {
          if (event.name === 'worker.error' || event.name === 'job.lease_lost' || event.name === 'job.retry_scheduled') {
            errors.push(event);
          }
        });
        workers.push(worker);
      }
      runs.push(...workers.map((worker) => worker.run()));

      await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM workhorse.job_outcome WHERE queue = $1', [q]);
          return Number(rows[0].n) === JOBS;
        },
        100_000,
        `all ${JOBS} jobs to reach an outcome`,
      );
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()));
      await Promise.all(runs);
      await Promise.all(pools.map((pool) => pool.end()));
    }

    expect(errors).toEqual([]);
    const twice = [...seen.entries()].filter(([, by]) => by.length !== 1);
    expect(twice).toEqual([]);
    expect(seen.size).toBe(JOBS);
    expect([...seen.keys()].sort()).toEqual([...ids].sort());

    const outcomes = await db.pool.query<{ state: string; n: string }>(
      'SELECT state, count(*) AS n FROM workhorse.job_outcome WHERE queue = $1 GROUP BY state',
      [q],
    );
    expect(outcomes.rows.map((r) => ({ state: r.state, n: Number(r.n) }))).toEqual([{ state: 'succeeded', n: JOBS }]);

    // The database agrees: one claim and one closed attempt per job, and the stored result names
    // the worker that ran the handler.
    const perJob = await db.pool.query<{ claims: string; attempts: string; mismatched: string }>(
      `SELECT
         (SELECT count(*) FROM workhorse.job_event e JOIN workhorse.job j ON j.id = e.job_id
           WHERE j.queue = $1 AND e.kind = 'claimed') AS claims,
         (SELECT count(*) FROM workhorse.attempt_history a JOIN workhorse.job j ON j.id = a.job_id
           WHERE j.queue = $1 AND a.outcome = 'succeeded' AND a.attempt = 1) AS attempts,
         (SELECT count(*) FROM workhorse.job_outcome o
           WHERE o.queue = $1 AND (o.result ->> 'by' IS DISTINCT FROM o.worker_id OR o.final_attempt <> 1)) AS mismatched`,
      [q],
    );
    expect(perJob.rows[0]).toEqual({ claims: String(JOBS), attempts: String(JOBS), mismatched: '0' });
  }, 150_000);
});
