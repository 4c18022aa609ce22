/**
 * Queue flow control across real worker processes (test/fixtures/flow-worker.ts, concurrency 20
 * each): a global concurrency limit is never exceeded and is reached; a rate limit is never
 * exceeded in any window and is reached; a limited queue does not hold back another queue the
 * same workers serve.
 */
import { join } from 'node:path';
import type { EnqueueRequest } from '../../lib/core';
import { FixtureProcesses, type FixtureProcess } from '../support/fixture-process';
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

async function enqueueJobs(q: string, n: number): Promise<void> {
  const requests: EnqueueRequest[] = Array.from({ length: n }, (_, i) => ({ type: 'flow.job', payload: { i }, queue: q }));
  for (let i = 0; i < n; i += 500) await queue.enqueueMany(requests.slice(i, i + 500));
}

async function finished(q: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM workhorse.job_outcome WHERE queue = $1 AND state = 'succeeded'", [q]);
  return rows[0].n;
}

/** The most claims of queue `q` (job_event `claimed`, server times) in any window [t, t + ms). */
async function busiestWindow(q: string, ms: number): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `SELECT coalesce(max(c.n), 0)::int AS n FROM (
       SELECT count(*) OVER (ORDER BY e.at RANGE BETWEEN CURRENT ROW AND $2::interval FOLLOWING) AS n
       FROM workhorse.job_event e JOIN workhorse.job j ON j.id = e.job_id
       WHERE j.queue = $1 AND e.kind = 'claimed') AS c`,
    [q, `${ms * 1000 - 1} microseconds`],
  );
  return rows[0].n;
}

describe('three worker processes, concurrency 20 each', () => {
  // (Three worker processes start and drain on a busy machine: minutes, not the default minute.)
  it('never run more than 5 jobs of a queue limited to 5 at once, and do run 5', async () => {
    const q = 'fc-concurrency';
    const total = 150;
    await admin.setQueuePolicy(q, { concurrency: 5 });
    await enqueueJobs(q, total);
    const workers = new Map(['fc-a', 'fc-b', 'fc-c'].map((id) => [id, startWorker(id, [q], 40)]));

    // A worker that completes a job of the queue claims the freed slot in the same round trip, so
    // the first worker to claim would keep the queue's 5 slots to itself. To have every worker
    // claim from it, the worker holding the slots is stopped (gracefully: it finishes its jobs
    // while the others claim) after each third of the jobs.
    const stopped = new Set<string>();
    const handOver = async (): Promise<void> => {
      const { rows } = await db.pool.query<{ worker_id: string }>(
        "SELECT DISTINCT worker_id FROM workhorse.job_runtime WHERE queue = $1 AND state = 'active'",
        [q],
      );
      const holder = rows.map((r) => r.worker_id).find((id) => !stopped.has(id));
      if (holder === undefined) return;
      stopped.add(holder);
      workers.get(holder)?.process.kill('SIGTERM');
    };

    // Sampled from the database throughout the run, from a connection of its own.
    const sampler = await db.pool.connect();
    const samples: number[] = [];
    try {
      await waitFor(
        async () => {
          const { rows } = await sampler.query<{ active: number; done: number }>(
            `SELECT (SELECT count(*) FROM workhorse.job_runtime WHERE queue = $1 AND state = 'active')::int AS active,
                    (SELECT count(*) FROM workhorse.job_outcome WHERE queue = $1)::int AS done`,
            [q],
          );
          samples.push(rows[0].active);
          if (rows[0].done >= ((stopped.size + 1) * total) / 3 && stopped.size < 2) await handOver();
          return rows[0].done === total;
        },
        240_000,
        'every job of the limited queue to finish',
      );
    } finally {
      sampler.release();
    }
    expect(samples.length).toBeGreaterThan(20);
    expect(Math.max(...samples)).toBe(5);

    // Exactly, from the attempts' own times: no instant with more than 5 attempts running.
    const { rows } = await db.pool.query<{ overlap: number; workers: number }>(
      `SELECT (SELECT max((SELECT count(*) FROM workhorse.attempt_history b
                           JOIN workhorse.job jb ON jb.id = b.job_id
                           WHERE jb.queue = $1 AND b.started_at <= a.started_at AND b.finished_at > a.started_at))
               FROM workhorse.attempt_history a JOIN workhorse.job ja ON ja.id = a.job_id WHERE ja.queue = $1)::int AS overlap,
              (SELECT count(DISTINCT a.worker_id) FROM workhorse.attempt_history a
               JOIN workhorse.job j ON j.id = a.job_id WHERE j.queue = $1)::int AS workers`,
      [q],
    );
    expect(rows[0].overlap).toBe(5);
    expect(rows[0].workers).toBe(3);
    expect(await finished(q)).toBe(total);
  }, 300_000);

  it('claim at most 50 jobs a second from a queue limited to 50/s, reach that rate, and keep draining another queue meanwhile', async () => {
    const limited = 'fc-rate';
    const free = 'fc-free';
    const total = 300;
    await admin.setQueuePolicy(limited, { rateLimit: { limit: 50, intervalMs: 1000 } });
    await enqueueJobs(limited, total);
    await enqueueJobs(free, 300);
    for (const id of ['fr-a', 'fr-b', 'fr-c']) startWorker(id, [limited, free], 0);

    await waitFor(async () => (await finished(limited)) === total, 240_000, 'every job of the rate-limited queue to finish');
    expect(await finished(free)).toBe(300);

    // Never more than 50 in any one-second window, and 50 in the busiest: the limit is reached.
    expect(await busiestWindow(limited, 1000)).toBe(50);

    const { rows } = await db.pool.query<{ first: number; last: number; free_last: number; pos_150: number }>(
      `WITH claims AS (
         SELECT j.queue, e.at, row_number() OVER (PARTITION BY j.queue ORDER BY e.at) AS k
         FROM workhorse.job_event e JOIN workhorse.job j ON j.id = e.job_id
         WHERE j.queue IN ($1, $2) AND e.kind = 'claimed')
       SELECT extract(epoch FROM min(at) FILTER (WHERE queue = $1))::float8 AS first,
              extract(epoch FROM max(at) FILTER (WHERE queue = $1))::float8 AS last,
              extract(epoch FROM max(at) FILTER (WHERE queue = $2))::float8 AS free_last,
              extract(epoch FROM min(at) FILTER (WHERE queue = $1 AND k = 150))::float8 AS pos_150
       FROM claims`,
      [limited, free],
    );
    const { first, last, free_last: freeLast, pos_150: at150 } = rows[0];
    // After the first window's 50, the other 250 claims came at close to 50 a second: each
    // window's claims wait only for a poll (pollMs 20, stretched up to 100 ms while idle) and a
    // round trip once the window has moved on; three quarters of the rate allows for a busy machine.
    const rate = (total - 50) / (last - first);
    expect(rate).toBeLessThanOrEqual(50);
    expect(rate).toBeGreaterThan(37.5);
    // The unlimited queue was drained while the limited one still had half its jobs waiting (its
    // 150th claim could not come before two windows had passed).
    expect(freeLast).toBeLessThan(at150);
  }, 300_000);

  it('claim nothing from a limited queue while it is paused, and go on after resume', async () => {
    const q = 'fc-paused';
    const marker = 'fc-marker';
    await admin.setQueuePolicy(q, { concurrency: 5, rateLimit: { limit: 100, intervalMs: 1000 } });
    await admin.pauseQueue(q);
    await enqueueJobs(q, 40);
    startWorker('fp-a', [q, marker], 0);
    // The worker claims from both queues in one statement: once a job of the other queue is
    // done, claims have passed over the paused one.
    await enqueueJobs(marker, 1);
    await waitFor(async () => (await finished(marker)) === 1, 180_000, 'the marker job to finish');
    await enqueueJobs(marker, 1);
    await waitFor(async () => (await finished(marker)) === 2, 120_000, 'a second marker job to finish');
    expect((await admin.listQueues()).find((i) => i.queue === q)).toMatchObject({ paused: true, ready: 40, active: 0 });
    await admin.resumeQueue(q);
    await waitFor(async () => (await finished(q)) === 40, 120_000, 'the resumed queue to drain');
    expect((await admin.listQueues()).find((i) => i.queue === q)).toMatchObject({ paused: false, concurrency: 5, active: 0, ready: 0 });
  }, 300_000);
});
