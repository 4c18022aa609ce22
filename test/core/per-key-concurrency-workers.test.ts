/**
 * Per-key concurrency across real worker processes (test/fixtures/flow-worker.ts, concurrency 20
 * each): one hot key among many, enqueued first. No key ever has more than n attempts running at
 * once, the hot key does run n, and the other keys are served while the hot key's backlog waits.
 */
import { join } from 'node:path';
import type { EnqueueRequest } from '../../lib/core';
import { FixtureProcesses, waitForLine, type FixtureProcess } from '../support/fixture-process';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const FIXTURE = join(__dirname, '..', 'fixtures', 'flow-worker.ts');

const { db, queue, admin } = useTestDatabase({
  afterEachTest: stopChildren,
  beforeDrop: () => children.killAll(),
});

const children = new FixtureProcesses();
const running: FixtureProcess[] = [];

function startWorker(workerId: string, queues: string[], jobMs: number): FixtureProcess {
  const child = children.start(FIXTURE, { FLOW_DATABASE_URL: db.url, FLOW_WORKER_ID: workerId, FLOW_QUEUES: queues.join(','), FLOW_JOB_MS: String(jobMs) });
  running.push(child);
  return child;
}

async function stopChildren(): Promise<void> {
  for (const child of running.splice(0)) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGTERM');
    await child.exited;
    expect({ exitCode: child.process.exitCode, stderr: child.stderr.join('') }).toEqual({ exitCode: 0, stderr: '' });
  }
}

describe('three worker processes, concurrency 20 each, a queue limited to 2 per key', () => {
  it('never run more than 2 jobs of one key at once, run 2 of the hot key, and serve the other keys meanwhile', async () => {
    const q = 'pk-workers';
    const hot = 60;
    const others = 20;
    await admin.setQueuePolicy(q, { perKey: { concurrency: 2 } });
    // The hot key's backlog first, so it leads the queue's order; then 3 jobs for each other key.
    const requests: EnqueueRequest[] = [
      ...Array.from({ length: hot }, (_, i) => ({ type: 'flow.job', payload: { i }, queue: q, concurrencyKey: 'hot' })),
      ...Array.from({ length: others * 3 }, (_, i) => ({ type: 'flow.job', payload: { i }, queue: q, concurrencyKey: `key-${i % others}` })),
    ];
    // Every worker is polling before the jobs arrive, so all three race for them.
    const processes = ['pk-a', 'pk-b', 'pk-c'].map((id) => startWorker(id, [q], 60));
    for (const child of processes) await waitForLine(child, 'STARTED', 60_000);
    await queue.enqueueMany(requests);

    await waitFor(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM workhorse.job_outcome WHERE queue = $1 AND state = 'succeeded'", [q]);
        return rows[0].n === requests.length;
      },
      240_000,
      'every job of the queue to finish',
    );

    // Exactly, from the attempts' own times: per key, the most attempts running at one instant.
    const { rows } = await db.pool.query<{ key: string; overlap: number; workers: number; last: Date }>(
      `SELECT ja.concurrency_key AS key,
              max((SELECT count(*) FROM workhorse.attempt_history b JOIN workhorse.job jb ON jb.id = b.job_id
                   WHERE jb.queue = $1 AND jb.concurrency_key = ja.concurrency_key
                     AND b.started_at <= a.started_at AND b.finished_at > a.started_at))::int AS overlap,
              count(DISTINCT a.worker_id)::int AS workers,
              max(a.finished_at) AS last
       FROM workhorse.attempt_history a JOIN workhorse.job ja ON ja.id = a.job_id
       WHERE ja.queue = $1
       GROUP BY 1`,
      [q],
    );
    expect(rows).toHaveLength(others + 1);
    for (const row of rows) expect(row.overlap).toBeLessThanOrEqual(2);
    const hotRow = rows.find((r) => r.key === 'hot')!;
    expect(hotRow.overlap).toBe(2);
    const { rows: workers } = await db.pool.query<{ n: number }>(
      'SELECT count(DISTINCT a.worker_id)::int AS n FROM workhorse.attempt_history a JOIN workhorse.job j ON j.id = a.job_id WHERE j.queue = $1',
      [q],
    );
    expect(workers[0].n).toBeGreaterThan(1);
    // The other keys did not wait for the hot key's backlog: all of them were done before the
    // hot key had finished half of its jobs (30 jobs at 2 at a time take 15 rounds of 60 ms).
    const { rows: half } = await db.pool.query<{ at: Date }>(
      `SELECT o.finished_at AS at FROM workhorse.job_outcome o JOIN workhorse.job j ON j.id = o.job_id
       WHERE j.queue = $1 AND j.concurrency_key = 'hot' ORDER BY o.finished_at OFFSET $2 LIMIT 1`,
      [q, hot / 2],
    );
    const othersLast = Math.max(...rows.filter((r) => r.key !== 'hot').map((r) => r.last.getTime()));
    expect(othersLast).toBeLessThan(half[0].at.getTime());
  }, 300_000);
});
