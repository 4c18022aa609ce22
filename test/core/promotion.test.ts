/**
 * Promotion of due jobs (delayed, retried, asleep): jobs that become due together keep their
 * `runAt` order, then their creation order, within a priority; and a backlog larger than one
 * tick's bound is worked off by ticks that follow each other at once (`more`), not one bounded
 * batch per tick interval.
 */
import { Worker, type EnqueueRequest } from '../../lib/core';
import { freshQueue } from '../support/db';
import { claim, claimOne, fail } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { db, queue } = useTestDatabase();

/** Makes the scheduled jobs of `q` due by moving every run time back by the same two hours. */
async function makeDue(q: string): Promise<void> {
  await db.pool.query("UPDATE workhorse.job_runtime SET run_at = run_at - interval '2 hours' WHERE queue = $1 AND state = 'scheduled'", [q]);
}

async function tick(): Promise<{ promoted: number; more: boolean }> {
  return (await db.pool.query<{ tick: { promoted: number; more: boolean } }>('SELECT workhorse.tick_v1() AS tick')).rows[0].tick;
}

/** Claims up to 1000 ready jobs of `q` and completes them; returns their payloads' `n` in claim order. */
async function claimOrder(q: string): Promise<number[]> {
  const claimed = await claim(db.pool, q, { limit: 1000 });
  await db.pool.query('SELECT workhorse.complete_many_v1($1, $2::jsonb)', [
    'test-worker',
    JSON.stringify(claimed.map((job) => ({ jobId: job.jobId, fence: Number(job.fence) }))),
  ]);
  return claimed.map((job) => (job.payload as { n: number }).n);
}

describe('FIFO among promoted jobs', () => {
  it('keeps runAt order, then creation order, within each priority', async () => {
    const q = freshQueue();
    const base = Date.now() + 3_600_000;
    // Created in this order; due in another: n is the expected claim order within a priority.
    const plan: { n: number; priority: number; runAt: number }[] = [
      { n: 13, priority: 0, runAt: base + 3000 },
      { n: 3, priority: 5, runAt: base + 2000 },
      { n: 11, priority: 0, runAt: base + 1000 },
      { n: 1, priority: 5, runAt: base + 1000 },
      { n: 12, priority: 0, runAt: base + 1000 },
      { n: 2, priority: 5, runAt: base + 1000 },
      { n: 10, priority: 0, runAt: base },
      { n: 4, priority: 5, runAt: base + 3000 },
    ];
    await queue.enqueueMany(plan.map((p) => ({ type: 'fifo.job', payload: { n: p.n }, queue: q, priority: p.priority, runAt: new Date(p.runAt) })));
    await makeDue(q);
    expect((await tick()).promoted).toBe(8);
    expect(await claimOrder(q)).toEqual([1, 2, 3, 4, 10, 11, 12, 13]);
  });

  it('keeps the order across the blocks of one promotion: 2,500 jobs due at the same moment come out in creation order', async () => {
    const q = freshQueue();
    const runAt = new Date(Date.now() + 3_600_000);
    for (let from = 0; from < 2500; from += 1000) {
      const batch: EnqueueRequest[] = [];
      for (let n = from; n < Math.min(from + 1000, 2500); n++) batch.push({ type: 'fifo.job', payload: { n }, queue: q, runAt });
      await queue.enqueueMany(batch);
    }
    await makeDue(q);
    expect((await tick()).promoted).toBe(2500);
    const order = [...(await claimOrder(q)), ...(await claimOrder(q)), ...(await claimOrder(q))];
    expect(order).toEqual(Array.from({ length: 2500 }, (_, n) => n));
  });

  it('retried jobs that become due together come back in the order they were due', async () => {
    const q = freshQueue();
    const ids = await queue.enqueueMany([0, 1, 2].map((n) => ({ type: 'fifo.job', payload: { n }, queue: q })));
    // Claimed 0, 1, 2; failed 2, 1, 0 with retries due 3, 2, 1 minutes later: due order 0, 1, 2.
    const jobs = [await claimOne(db.pool, q), await claimOne(db.pool, q), await claimOne(db.pool, q)];
    expect(jobs.map((j) => j.jobId)).toEqual(ids);
    for (const [i, job] of [...jobs.entries()].reverse()) {
      const row = await fail(db.pool, job, { name: 'Error', message: 'later' }, { retryDelayMs: (3 - i) * 60_000 });
      expect(row.status).toBe('retry_scheduled');
    }
    await db.pool.query("UPDATE workhorse.job_runtime SET run_at = run_at - interval '10 minutes' WHERE queue = $1", [q]);
    expect((await tick()).promoted).toBe(3);
    expect(await claimOrder(q)).toEqual([2, 1, 0]);
  });
});

describe('a backlog of due jobs', () => {
  it('a tick promotes a bounded block and says there is more; ticks in a row promote all of it', async () => {
    const q = freshQueue();
    const runAt = new Date(Date.now() + 3_600_000);
    for (let from = 0; from < 12_000; from += 1000) {
      await queue.enqueueMany(Array.from({ length: 1000 }, (_, i) => ({ type: 'backlog.job', payload: { n: from + i }, queue: q, runAt })));
    }
    await makeDue(q);
    expect(await tick()).toMatchObject({ promoted: 10_000, more: true });
    expect(await tick()).toMatchObject({ promoted: 2000, more: false });
    const { rows } = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM workhorse.job_runtime WHERE queue = $1 AND state = 'ready'", [q]);
    expect(rows[0].n).toBe(12_000);
  });

  it('a worker ticks again at once while there is more: 12,000 due jobs run without waiting for its next tick', async () => {
    const q = freshQueue();
    const runAt = new Date(Date.now() + 3_600_000);
    for (let from = 0; from < 12_000; from += 1000) {
      await queue.enqueueMany(Array.from({ length: 1000 }, (_, i) => ({ type: 'backlog.job', payload: { n: from + i }, queue: q, runAt })));
    }
    await makeDue(q);
    let ran = 0;
    // Its tick interval is 10 minutes: only ticks that follow each other at once can promote everything in time.
    const worker = new Worker(queue, { queues: [q], concurrency: 100, listen: false, pollMs: 50, tickMs: 600_000 }).handle(
      'backlog.job',
      async () => {
        ran++;
        return null;
      },
    );
    void worker.run().catch(() => undefined);
    try {
      await waitFor(() => ran === 12_000, 60_000, 'every job of the backlog to run');
    } finally {
      await worker.stop();
    }
    const { rows } = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM workhorse.job_outcome WHERE queue = $1 AND state = 'succeeded'", [q]);
    expect(rows[0].n).toBe(12_000);
  });
});
