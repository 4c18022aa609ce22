/**
 * Queue flow control, one process: setting and listing a policy, bad input, and what the claim
 * gives from a limited queue (concurrency, rate, pause, several queues, a policy row another
 * claim holds). The multi-process guarantees are in flow-control-workers.test.ts.
 */
import { fromPgError, WorkhorseValidationError, type QueuePolicy } from '../../lib/core';
import { claim, complete } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

const { db, queue, admin } = useTestDatabase();

async function enqueueMany(q: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await queue.enqueue('flow.job', { i }, { queue: q }));
  return ids;
}

async function validationField(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    return (error as WorkhorseValidationError).field;
  }
  throw new Error('expected a WorkhorseValidationError');
}

describe('setQueuePolicy', () => {
  it('sets, shows, replaces and removes a policy', async () => {
    const info = await admin.setQueuePolicy('policy-set', { concurrency: 3, rateLimit: { limit: 10, intervalMs: 1000 } }, { actor: 'ops' });
    expect(info).toMatchObject({ queue: 'policy-set', concurrency: 3, rateLimit: { limit: 10, intervalMs: 1000 }, ready: 0 });
    expect((await admin.listQueues()).find((q) => q.queue === 'policy-set')).toEqual(info);

    // Replaced as a whole: a limit left out is no longer applied.
    expect(await admin.setQueuePolicy('policy-set', { rateLimit: { limit: 5, intervalMs: 60_000 } })).toMatchObject({
      concurrency: null,
      rateLimit: { limit: 5, intervalMs: 60_000 },
    });
    expect(await admin.setQueuePolicy('policy-set', { concurrency: 2, rateLimit: null })).toMatchObject({ concurrency: 2, rateLimit: null });

    expect(await admin.setQueuePolicy('policy-set', null)).toMatchObject({ concurrency: null, rateLimit: null });
    expect((await admin.listQueues()).find((q) => q.queue === 'policy-set')).toBeUndefined();
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM workhorse.queue_policy');
    expect(rows[0].n).toBe(0);
  });

  it.each<[string, unknown, string]>([
    ['a zero concurrency', { concurrency: 0 }, 'concurrency'],
    ['a fractional concurrency', { concurrency: 1.5 }, 'concurrency'],
    ['a concurrency as text', { concurrency: '5' }, 'concurrency'],
    ['a NaN concurrency', { concurrency: Number.NaN }, 'concurrency'],
    ['an unknown field', { concurency: 5 }, 'concurency'],
    ['a rate limit that is a number', { rateLimit: 50 }, 'rateLimit'],
    ['a rate limit without its interval', { rateLimit: { limit: 50 } }, 'rateLimit.intervalMs'],
    ['a rate limit of zero', { rateLimit: { limit: 0, intervalMs: 1000 } }, 'rateLimit.limit'],
    ['an interval over a day', { rateLimit: { limit: 1, intervalMs: 86_400_001 } }, 'rateLimit.intervalMs'],
    ['an unknown rate limit field', { rateLimit: { limit: 1, intervalMs: 1000, burst: 2 } }, 'rateLimit.burst'],
    ['a policy that is an array', [], 'policy'],
  ])('refuses %s with a typed error naming the field, writing nothing', async (_what, policy, field) => {
    expect(await validationField(() => admin.setQueuePolicy('policy-bad', policy as QueuePolicy))).toBe(field);
    expect(await validationField(() => admin.setQueuePolicy('', { concurrency: 1 }))).toBe('queue');
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM workhorse.queue_policy WHERE queue = 'policy-bad'");
    expect(rows[0].n).toBe(0);
  });

  it.each<[string, string, string]>([
    ['a zero concurrency', '{"concurrency": 0}', 'concurrency'],
    ['an unknown field', '{"burst": 1}', 'burst'],
    ['a rate limit without its limit', '{"rateLimit": {"intervalMs": 10}}', 'rateLimit.limit'],
    ['an unknown rate limit field', '{"rateLimit": {"limit": 1, "intervalMs": 10, "x": 1}}', 'rateLimit.x'],
    ['a policy that is a string', '"fast"', 'policy'],
  ])('set_queue_policy_v1 refuses %s itself (P1001 naming the field)', async (_what, policy, field) => {
    expect(
      await validationField(() =>
        db.pool.query('SELECT workhorse.set_queue_policy_v1($1, $2::jsonb)', ['policy-bad', policy]).catch((e: unknown) => {
          throw fromPgError(e);
        }),
      ),
    ).toBe(field);
  });
});

describe('claims from a limited queue', () => {
  it('gives at most `concurrency` active jobs, and more as they finish', async () => {
    const q = 'limit-concurrency';
    await enqueueMany(q, 6);
    await admin.setQueuePolicy(q, { concurrency: 2 });
    const first = await claim(db.pool, q, { limit: 10 });
    expect(first).toHaveLength(2);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(0);
    await complete(db.pool, first[0]);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(1);
    // Lowered below the jobs already active: none is taken away, none more is given.
    await admin.setQueuePolicy(q, { concurrency: 1 });
    await complete(db.pool, first[1]);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(0);
    await admin.setQueuePolicy(q, null);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(3);
  });

  it('gives at most `limit` claims per window, counted across claims and kept across a change', async () => {
    const q = 'limit-rate';
    await enqueueMany(q, 8);
    await admin.setQueuePolicy(q, { rateLimit: { limit: 3, intervalMs: 3_600_000 } });
    expect(await claim(db.pool, q, { limit: 2 })).toHaveLength(2);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(1);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(0);
    // A higher rate counts the claims already made in the window.
    await admin.setQueuePolicy(q, { rateLimit: { limit: 5, intervalMs: 3_600_000 }, concurrency: 100 });
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(2);
    const { rows } = await db.pool.query('SELECT window_n FROM workhorse.queue_policy WHERE queue = $1', [q]);
    expect(rows[0].window_n).toEqual([2, 1, 2]);
  });

  it('lets claims in again once the window has passed', async () => {
    const q = 'limit-window';
    await enqueueMany(q, 4);
    await admin.setQueuePolicy(q, { rateLimit: { limit: 2, intervalMs: 200 } });
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(2);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(0);
    // Wait until the first claim has left the window (a wait for a condition on the server's clock).
    await db.pool.query(
      "SELECT pg_sleep(greatest(0, extract(epoch FROM (at + interval '201 milliseconds' - clock_timestamp())))) " +
        "FROM (SELECT max(e.at) AS at FROM workhorse.job_event e JOIN workhorse.job j ON j.id = e.job_id WHERE j.queue = $1 AND e.kind = 'claimed') AS c",
      [q],
    );
    const again = await claim(db.pool, q, { limit: 10 });
    expect(again).toHaveLength(2);
    // The window dropped the claims that left it.
    const { rows } = await db.pool.query('SELECT window_n FROM workhorse.queue_policy WHERE queue = $1', [q]);
    expect(rows[0].window_n).toEqual([2]);
  });

  it('gives nothing while the queue is paused, whatever its allowance', async () => {
    const q = 'limit-paused';
    await enqueueMany(q, 3);
    await admin.setQueuePolicy(q, { concurrency: 5, rateLimit: { limit: 5, intervalMs: 3_600_000 } });
    await admin.pauseQueue(q);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(0);
    await admin.resumeQueue(q);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(3);
    expect((await admin.listQueues()).find((i) => i.queue === q)).toMatchObject({ active: 3, concurrency: 5 });
  });

  it('takes the rest of a claim from the other queues a worker serves', async () => {
    await enqueueMany('mixed-limited', 5);
    await enqueueMany('mixed-free', 5);
    await admin.setQueuePolicy('mixed-limited', { concurrency: 1 });
    const claimed = await claim(db.pool, ['mixed-limited', 'mixed-free'], { limit: 6 });
    expect(claimed.filter((j) => j.queue === 'mixed-limited')).toHaveLength(1);
    expect(claimed.filter((j) => j.queue === 'mixed-free')).toHaveLength(5);
  });

  it('skips a limited queue whose policy another claim holds, without waiting, and claims the others', async () => {
    await enqueueMany('held-limited', 3);
    await enqueueMany('held-free', 3);
    await admin.setQueuePolicy('held-limited', { concurrency: 10 });
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM workhorse.queue_policy WHERE queue = 'held-limited' FOR UPDATE");
      // A claim that waited for the lock would hang here (the holder commits only after it).
      const claimed = await claim(db.pool, ['held-limited', 'held-free'], { limit: 10 });
      expect(claimed.map((j) => j.queue).sort()).toEqual(['held-free', 'held-free', 'held-free']);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    expect(await claim(db.pool, 'held-limited', { limit: 10 })).toHaveLength(3);
  });
});
