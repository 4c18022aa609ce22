/**
 * A bulk cancel racing worker processes: while three worker processes drain a queue, an
 * operator cancels every job of it a page at a time. Every job ends exactly once (one outcome,
 * one terminal event, no live row), and the counts add up: what the bulk calls canceled at once
 * plus what the workers acknowledged is what ended canceled, the rest succeeded.
 */
import { join } from 'node:path';
import { FixtureProcesses, waitForLine } from '../support/fixture-process';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';
import { CREATE_SIDE_EFFECTS_SQL } from '../fixtures/side-effects';

const FIXTURE = join(__dirname, '..', 'fixtures', 'bulk-worker.ts');
const JOBS = 600;

const children = new FixtureProcesses();
const { pool, url, queue, admin } = useTestDatabase({ beforeDrop: () => children.killAll() });

it('cancels a queue a page at a time while worker processes drain it; every job ends once and the counts add up', async () => {
  await pool.query(CREATE_SIDE_EFFECTS_SQL);
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i += 200) {
    ids.push(...(await queue.enqueueMany(Array.from({ length: 200 }, (_, n) => ({ type: 'bulk.work', payload: { n: i + n }, queue: 'bulk' })))));
  }
  const workers = [1, 2, 3].map((n) => children.start(FIXTURE, { BULK_DATABASE_URL: url, BULK_WORKER_ID: `bulk-${n}`, BULK_QUEUE: 'bulk' }));
  for (const worker of workers) await waitForLine(worker, 'STARTED ', 30_000);
  // Let the workers get going, so the cancel meets jobs in every live state.
  await waitFor(async () => (await pool.query("SELECT 1 FROM workhorse.job_outcome WHERE queue = 'bulk'")).rowCount! >= 30, 30_000, 'the first jobs to finish');

  const totals = { canceled: 0, cancel_requested: 0, busy: 0, calls: 0 };
  for (;;) {
    const page = await admin.cancelMatching({ queue: 'bulk' }, { limit: 50, actor: 'ops', reason: 'incident 82' });
    totals.calls += 1;
    totals.canceled += page.outcomes.canceled ?? 0;
    totals.cancel_requested += page.outcomes.cancel_requested ?? 0;
    totals.busy += page.busy;
    expect(page.changed).toBeLessThanOrEqual(50);
    if (!page.more) break;
  }
  expect(totals.calls).toBeGreaterThan(1);

  await waitFor(async () => (await pool.query("SELECT 1 FROM workhorse.job_runtime WHERE queue = 'bulk'")).rowCount === 0, 60_000, 'every job to end');
  await Promise.all(workers.map(async (worker) => {
    worker.process.kill('SIGTERM');
    await worker.exited;
  }));

  const { rows: outcomes } = await pool.query<{ state: string; n: number }>(
    "SELECT state, count(*)::int AS n FROM workhorse.job_outcome WHERE queue = 'bulk' GROUP BY state",
  );
  const by = Object.fromEntries(outcomes.map((r) => [r.state, r.n]));
  expect((by.succeeded ?? 0) + (by.canceled ?? 0)).toBe(JOBS);
  expect(by.failed).toBeUndefined();
  // Canceled at once, plus the running ones whose worker acknowledged (some finished first).
  expect(by.canceled).toBeGreaterThanOrEqual(totals.canceled);
  expect(by.canceled).toBeLessThanOrEqual(totals.canceled + totals.cancel_requested);
  expect(totals.canceled).toBeGreaterThan(0);

  // Exactly one terminal event per job, and a canceled job carries the operator's reason.
  const { rows: terminal } = await pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM workhorse.job_event WHERE job_id = ANY ($1) AND kind IN ('succeeded', 'failed', 'canceled') GROUP BY job_id",
    [ids],
  );
  expect(terminal).toHaveLength(JOBS);
  expect(terminal.every((r) => r.n === 1)).toBe(true);
  const { rows: reasons } = await pool.query<{ message: string; n: number }>(
    "SELECT error ->> 'message' AS message, count(*)::int AS n FROM workhorse.job_outcome WHERE queue = 'bulk' AND state = 'canceled' GROUP BY 1",
  );
  expect(reasons).toEqual([{ message: 'incident 82', n: by.canceled }]);
  // A job that succeeded ran its handler to the end; one canceled at once never did.
  const { rows: done } = await pool.query<{ n: number }>(
    "SELECT count(DISTINCT s.job_id)::int AS n FROM public.side_effects s JOIN workhorse.job_outcome o ON o.job_id = s.job_id WHERE o.state = 'succeeded'",
  );
  expect(done[0].n).toBe(by.succeeded);
}, 120_000);
