/**
 * A `{ transactional: true }` handler keeps its lease as a plain one does: after it saved a
 * checkpoint or reported progress (writes that touch its job) it still runs many leases long
 * with one attempt, and a durable sleep after a checkpoint does not wait on its own transaction.
 */
import { Worker, type HandlerContext, type WorkerEvent } from '../../lib/core';
import { freshQueue } from '../support/db';
import { useTestDatabase } from '../support/test-database';
import { delay, waitFor } from '../support/wait';

const { pool, queue, admin } = useTestDatabase({
  afterEachTest: async () => {
    for (const { worker, done } of running.splice(0)) {
      await worker.stop();
      await done;
    }
  },
});
const running: { worker: Worker; done: Promise<void> }[] = [];

beforeAll(async () => {
  await pool.query('CREATE TABLE ledger (job_id uuid NOT NULL, stage text NOT NULL)');
});

/** A worker with a one-second lease (renewed every 200 ms), running until the test ends. */
function start(q: string, handler: (payload: unknown, ctx: HandlerContext) => Promise<unknown>): WorkerEvent[] {
  const events: WorkerEvent[] = [];
  const worker = new Worker(queue, { queues: [q], leaseMs: 1000, heartbeatMs: 200, pollMs: 50, tickMs: 100 }).handle('ledger.job', handler, {
    transactional: true,
  });
  worker.on((event) => events.push(event));
  running.push({ worker, done: worker.run() });
  return events;
}

async function attempts(jobId: string): Promise<{ attempt: number; outcome: string }[]> {
  const { rows } = await pool.query<{ attempt: number; outcome: string }>(
    'SELECT attempt, outcome FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
    [jobId],
  );
  return rows;
}

it.each([
  ['a checkpoint', (ctx: HandlerContext) => ctx.checkpoint('booked', () => ({ at: 'stage 1' }))],
  ['progress', (ctx: HandlerContext) => ctx.setProgress({ done: 1, total: 2 })],
])('after %s, runs four leases long with one attempt and succeeds', async (_label, touchJob) => {
  const q = freshQueue();
  const events = start(q, async (_payload, ctx) => {
    await ctx.client?.query("INSERT INTO ledger VALUES ($1, 'before')", [ctx.jobId]);
    await touchJob(ctx);
    await delay(4000);
    if (ctx.signal.aborted) throw ctx.signal.reason;
    await ctx.client?.query("INSERT INTO ledger VALUES ($1, 'after')", [ctx.jobId]);
    return 'booked';
  });
  const id = await queue.enqueue('ledger.job', null, { queue: q });
  const job = await waitFor(
    async () => {
      const j = await admin.getJob(id);
      return j && ['succeeded', 'failed', 'canceled'].includes(j.state) ? j : undefined;
    },
    20000,
    'the job to end',
  );
  expect(job).toMatchObject({ state: 'succeeded', currentAttempt: 1, result: 'booked' });
  expect(await attempts(id)).toEqual([{ attempt: 1, outcome: 'succeeded' }]);
  expect(events.some((e) => e.name === 'job.lease_lost')).toBe(false);
  const { rows } = await pool.query<{ stage: string }>('SELECT stage FROM ledger WHERE job_id = $1 ORDER BY stage DESC', [id]);
  expect(rows.map((r) => r.stage)).toEqual(['before', 'after']);
});

it('sleeps after a checkpoint without waiting on its own transaction, then wakes and succeeds', async () => {
  const q = freshQueue();
  const runs: number[] = [];
  start(q, async (_payload, ctx) => {
    runs.push(Date.now());
    await ctx.checkpoint('first', () => 1);
    await ctx.sleep('nap', 500);
    return 'woke';
  });
  const started = Date.now();
  const id = await queue.enqueue('ledger.job', null, { queue: q });
  await waitFor(async () => (await admin.getJob(id))?.state === 'succeeded', 20000, 'the job to succeed');
  // Two runs, a nap apart; not a lease (or several) apart, as a sleep stuck on its own lock was.
  expect(runs).toHaveLength(2);
  expect(Date.now() - started).toBeLessThan(5000);
  expect(await attempts(id)).toEqual([{ attempt: 1, outcome: 'succeeded' }]);
});
