/**
 * A blocked parent failed by its deadline (maintenance) while its children end (completions) at
 * the same moment. Both sides lock the parent and a child: maintenance must take them in the
 * order every child's end takes them (child before parent) or not wait at all, so that neither
 * side is aborted as a deadlock. Real concurrent connections race over many parents.
 */
import type { Pool } from 'pg';
import { Admin, Queue } from '../../lib/core';
import { attemptHistoryViolations, expectSplitInvariant } from '../support/invariants';
import { claim, type ClaimedJob } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

const { db } = useTestDatabase({ pool: { max: 8 }, checkInvariants: false });

beforeAll(async () => {
  // Connections for the completion lanes and the maintenance lane at once.
});

const PARENTS = 200;
const LANES = 4;

/** `count` parents of queue `q`, each blocked on one running child of queue `${q}-c`; the children claimed by `child-worker`. */
async function blockedParents(pool: Pool, queue: Queue, q: string, count: number): Promise<{ parents: string[]; children: ClaimedJob[] }> {
  const parents = await queue.enqueueMany(
    Array.from({ length: count }, (_, i) => ({ type: 'race.parent', payload: { i }, queue: q, deadline: new Date(Date.now() + 3_600_000) })),
  );
  const claimed = await claim(pool, q, { workerId: 'parent-worker', limit: count });
  expect(claimed).toHaveLength(count);
  for (const job of claimed) {
    const { rows } = await pool.query<{ status: string }>('SELECT status FROM workhorse.run_children_v1($1, $2, $3, $4, $5::jsonb)', [
      job.jobId,
      job.workerId,
      job.fence,
      'only',
      JSON.stringify([{ type: 'race.child', payload: null, queue: `${q}-c` }]),
    ]);
    expect(rows[0].status).toBe('parked');
  }
  const children = await claim(pool, `${q}-c`, { workerId: 'child-worker', limit: count });
  expect(children).toHaveLength(count);
  return { parents, children };
}

describe('a blocked parent failed by its deadline while its children end', () => {
  test('maintenance and completions racing over 200 parents: no deadlock, every parent fails by its deadline, every child ends', async () => {
    const { pool } = db;
    const q = 'deadline-race';
    const { parents, children } = await blockedParents(pool, new Queue(pool), q, PARENTS);
    // Every parent's deadline passes now (moved by hand rather than waited for).
    await pool.query('UPDATE workhorse.job_runtime SET deadline = clock_timestamp() WHERE job_id = ANY ($1::uuid[])', [parents]);

    const errors: string[] = [];
    const record = (side: string) => (error: { code?: string; message?: string }) => {
      errors.push(`${side}: ${error.code ?? ''} ${error.message ?? String(error)}`);
    };
    // Completions: each lane ends its share of the children one by one, in batches of 5 as a
    // worker's round trip does (complete_many_v1 locks a batch in id order), from both ends.
    const lanes = Array.from({ length: LANES }, async (_, lane) => {
      const mine = children.filter((_, i) => i % LANES === lane);
      if (lane % 2) mine.reverse();
      for (let i = 0; i < mine.length; i += 5) {
        const items = mine.slice(i, i + 5).map((c) => ({ jobId: c.jobId, fence: Number(c.fence), result: 'done' }));
        await pool.query('SELECT * FROM workhorse.complete_many_v1($1, $2::jsonb)', ['child-worker', JSON.stringify(items)]).catch(record('completion'));
      }
    });
    // Maintenance: passes until no parent is left past its deadline.
    const maintenance = (async () => {
      for (let pass = 0; pass < 1000; pass++) {
        const { rows } = await pool
          .query<{ left: number }>(
            `SELECT workhorse.expire_deadlines_v1(1000),
                    (SELECT count(*)::int FROM workhorse.job_runtime WHERE job_id = ANY ($1::uuid[])) AS left`,
            [parents],
          )
          .catch((error: unknown) => {
            record('maintenance')(error as Error);
            return { rows: [{ left: 1 }] };
          });
        if (rows[0].left === 0) return;
      }
    })();
    await Promise.all([...lanes, maintenance]);

    expect(errors).toEqual([]);
    const { rows: ended } = await pool.query<{ state: string; name: string | null; n: number }>(
      `SELECT o.state, o.error ->> 'name' AS name, count(*)::int AS n FROM workhorse.job_outcome o
        WHERE o.job_id = ANY ($1::uuid[]) GROUP BY 1, 2`,
      [parents],
    );
    expect(ended).toEqual([{ state: 'failed', name: 'DeadlineExceeded', n: PARENTS }]);
    // A child ends by its completion (succeeded) or, once its parent failed first, by the cancel
    // that asked it to stop (its completion is refused): never left live.
    const { rows: live } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM workhorse.job_runtime WHERE queue = $1', [`${q}-c`]);
    expect(live[0].n).toBe(0);
    const states = new Set((await new Admin(pool).listJobs({ queue: `${q}-c`, limit: 500 })).items.map((j) => j.state));
    expect([...states].every((s) => s === 'succeeded' || s === 'canceled')).toBe(true);
    await expectSplitInvariant(pool);
    expect(await attemptHistoryViolations(pool)).toEqual([]);
  });
});
