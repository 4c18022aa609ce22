/**
 * Child jobs: `ctx.runChild` / `ctx.runChildren` park the parent in `blocked` with its children
 * in one transaction and replay it with their outcomes; failures are catchable
 * `ChildJobFailedError`s; a different child under a key is a `ChildJobConflictError`; parking is
 * fenced; canceling a parent cancels its live children; lineage in admin.getJob, the timeline and
 * listJobs; 1,000 parents with 10 children each across worker processes, and worker processes
 * killed (SIGKILL) at every park and resume point.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import {
  ChildJobConflictError,
  ChildJobFailedError,
  fromPgError,
  NonRetryableError,
  Worker,
  type ChildOutcome,
  type WorkerEventOf,
} from '../../lib/core';
import { CREATE_SIDE_EFFECTS_SQL } from '../fixtures/side-effects';
import { stateOf } from '../support/job-state';
import { claimOne, complete } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const FIXTURE = join(__dirname, '..', 'fixtures', 'family-worker.ts');
const REGISTER = require.resolve('../support/ts-register.js');

const { db, pool, queue, admin } = useTestDatabase({
  beforeDrop: async () => {
    for (const p of processes) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    await Promise.all(processes.map((p) => (p.exitCode === null && p.signalCode === null ? new Promise((r) => p.once('exit', r)) : null)));
  },
});
const processes: ChildProcess[] = [];

beforeAll(async () => {
  await pool.query(CREATE_SIDE_EFFECTS_SQL);
});

/** Runs workers on `queues` until `done` holds, then stops them. */
async function drain(queues: string[], setup: (worker: Worker) => void, done: () => Promise<boolean>): Promise<void> {
  const worker = new Worker(queue, { queues, pollMs: 20, tickMs: 200, concurrency: 10 });
  setup(worker);
  const running = worker.run();
  try {
    await waitFor(done, 60_000, 'the jobs to end');
  } finally {
    await worker.stop();
    await running;
  }
}

const ended = (id: string) => async () => ['succeeded', 'failed', 'canceled'].includes((await stateOf(pool, id)) ?? '');

describe('ctx.runChild', () => {
  test('returns the child result after the parent parked without its slot and replayed; earlier checkpoints run once', async () => {
    const runs: string[] = [];
    const blocked: WorkerEventOf<'job.blocked'>[] = [];
    const parent = await queue.enqueue('fam.parent', { n: 21 }, { queue: 'rc' });
    await drain(
      ['rc'],
      (w) => {
        w.on(['job.blocked'], (event) => blocked.push(event));
        w.handle('fam.parent', async (payload: { n: number }, ctx) => {
          runs.push(`parent:${ctx.attempt}`);
          await ctx.checkpoint('first', () => runs.push('first'));
          const doubled = await ctx.runChild<number>('double', 'fam.double', payload.n, { queue: 'rc' });
          return { doubled, attempt: ctx.attempt };
        });
        w.handle('fam.double', (n: number) => {
          runs.push('child');
          return n * 2;
        });
      },
      ended(parent),
    );
    const job = await admin.getJob(parent);
    expect(job).toMatchObject({ state: 'succeeded', result: { doubled: 42, attempt: 1 }, currentAttempt: 1 });
    expect(runs).toEqual(['parent:1', 'first', 'child', 'parent:1']);
    // The worker reported the park as `job.blocked`, waiting for its children.
    expect(blocked).toEqual([expect.objectContaining({ name: 'job.blocked', jobId: parent, attempt: 1, waitingFor: 'children' })]);
    // Lineage both ways, and the listing of the parent's children.
    expect(job?.children).toEqual([{ id: expect.any(String), state: 'succeeded', key: 'double' }]);
    const childId = job?.children[0].id as string;
    expect((await admin.getJob(childId))?.parentId).toBe(parent);
    expect((await admin.listJobs({ parentId: parent })).items.map((j) => j.id)).toEqual([childId]);
    expect((await admin.listJobs({ parentId: parent, states: ['failed'] })).items).toEqual([]);
    const kinds = (await admin.getJobTimeline(parent)).items.map((e) => `${e.source}:${e.kind}`);
    expect(kinds).toEqual(['event:enqueued', 'event:claimed', 'event:checkpoint_saved', 'event:blocked', 'event:unblocked', 'event:claimed', 'attempt:succeeded', 'event:succeeded']);
    expect((await admin.getJobTimeline(childId)).items.map((e) => e.kind)).toEqual(['enqueued', 'child_of', 'claimed', 'succeeded', 'succeeded']);
  });

  test('a failed child is a ChildJobFailedError with its error envelope, which the handler can catch', async () => {
    let caught: ChildJobFailedError | undefined;
    const parent = await queue.enqueue('fam.catcher', null, { queue: 'rcf' });
    await drain(
      ['rcf'],
      (w) => {
        w.handle('fam.catcher', async (_payload, ctx) => {
          try {
            await ctx.runChild('charge', 'fam.declined', { amount: 5 }, { queue: 'rcf', maxAttempts: 1 });
            return 'charged';
          } catch (error) {
            if (!(error instanceof ChildJobFailedError)) throw error;
            caught = error;
            return 'compensated';
          }
        });
        w.handle('fam.declined', () => {
          throw new NonRetryableError('card declined');
        });
      },
      ended(parent),
    );
    expect((await admin.getJob(parent))?.result).toBe('compensated');
    expect(caught).toBeInstanceOf(ChildJobFailedError);
    expect(caught?.childState).toBe('failed');
    expect(caught?.childError).toMatchObject({ name: 'NonRetryableError', message: 'card declined' });
  });

  test('ctx.runChildren returns every outcome, settled, in the order given', async () => {
    let outcomes: ChildOutcome[] = [];
    const parent = await queue.enqueue('fam.fanout', null, { queue: 'rcs' });
    await drain(
      ['rcs'],
      (w) => {
        w.handle('fam.fanout', async (_payload, ctx) => {
          outcomes = await ctx.runChildren('all', [0, 1, 2, 3].map((i) => ({ type: 'fam.maybe', payload: i, options: { queue: 'rcs', maxAttempts: 1 } })));
          return outcomes.length;
        });
        w.handle('fam.maybe', (i: number) => {
          if (i % 2 === 1) throw new Error(`odd ${i}`);
          return i * 10;
        });
      },
      ended(parent),
    );
    expect(outcomes.map((o) => [o.state, o.result, o.error?.message ?? null])).toEqual([
      ['succeeded', 0, null],
      ['failed', null, 'odd 1'],
      ['succeeded', 20, null],
      ['failed', null, 'odd 3'],
    ]);
  });
});

describe('run_children_v1 (the protocol)', () => {
  const call = (job: { jobId: string; workerId: string; fence: string }, key: string, requests: unknown[]) =>
    pool.query<{ status: string; child_id: string | null; state: string | null }>(
      'SELECT * FROM workhorse.run_children_v1($1, $2, $3, $4, $5::jsonb)',
      [job.jobId, job.workerId, job.fence, key, JSON.stringify(requests)],
    );

  test('a stale worker cannot park or start children; a replay under a key asking for another child is a typed conflict', async () => {
    const parent = await queue.enqueue('fam.p', null, { queue: 'proto' });
    const job = await claimOne(pool, 'proto');
    const count = async () => Number((await pool.query('SELECT count(*) AS n FROM workhorse.job')).rows[0].n);
    const before = await count();
    expect((await call({ ...job, fence: String(Number(job.fence) + 1) }, 'k', [{ type: 'fam.c', payload: 1, queue: 'proto-c' }])).rows).toEqual([
      { status: 'stale', child_id: null, state: null, result: null, error: null },
    ]);
    expect(await count()).toBe(before);
    expect(await stateOf(pool, parent)).toBe('active');

    expect((await call(job, 'k', [{ type: 'fam.c', payload: 1, queue: 'proto-c' }])).rows[0].status).toBe('parked');
    expect(await stateOf(pool, parent)).toBe('blocked');
    // The parked job's old owner can no longer write.
    expect((await call(job, 'k', [{ type: 'fam.c', payload: 1, queue: 'proto-c' }])).rows[0].status).toBe('stale');
    expect(await complete(pool, job)).toBe('stale');

    const child = await claimOne(pool, 'proto-c');
    await complete(pool, child, 'done');
    expect(await stateOf(pool, parent)).toBe('ready');
    const again = await claimOne(pool, 'proto');
    expect(again.attempt).toBe(job.attempt);
    const conflict = await call(again, 'k', [{ type: 'fam.c', payload: 2, queue: 'proto-c' }]).catch((e: unknown) => fromPgError(e));
    expect(conflict).toBeInstanceOf(ChildJobConflictError);
    expect(conflict).toMatchObject({ field: 'key', childIds: [child.jobId] });
    expect((await call(again, 'k', [{ type: 'fam.c', payload: 1, queue: 'proto-c' }])).rows).toEqual([
      { status: 'settled', child_id: child.jobId, state: 'succeeded', result: 'done', error: null },
    ]);
    await complete(pool, again);
  });

  test('canceling a parent cancels its live children: waiting ones at once, running ones by request', async () => {
    const parent = await queue.enqueue('fam.p', null, { queue: 'cx' });
    const job = await claimOne(pool, 'cx');
    await call(job, 'kids', [
      { type: 'fam.c', payload: 1, queue: 'cx-run' },
      { type: 'fam.c', payload: 2, queue: 'cx-wait' },
    ]);
    const running = await claimOne(pool, 'cx-run');
    expect(await admin.cancel(parent)).toBe('canceled');
    const links = (await admin.getJob(parent))?.children.map((c) => c.state);
    expect(links).toEqual(['active', 'canceled']);
    const waiting = (await admin.listJobs({ parentId: parent, states: ['canceled'] })).items[0];
    expect(waiting.error).toMatchObject({ name: 'Canceled', parentId: parent });
    expect((await admin.getJob(running.jobId))?.cancelRequestedAt).not.toBeNull();
    expect(await complete(pool, running)).toBe('canceled');
  });
});

describe('families across worker processes', () => {
  function startWorker(name: string, q: string, failpoints?: string, concurrency = 50, leaseMs = 1000): ChildProcess {
    const proc = spawn(process.execPath, ['-r', REGISTER, FIXTURE], {
      env: {
        ...process.env,
        FAMILY_DATABASE_URL: db.url,
        FAMILY_WORKER_ID: name,
        FAMILY_QUEUE: q,
        FAMILY_CONCURRENCY: String(concurrency),
        FAMILY_LEASE_MS: String(leaseMs),
        ...(failpoints ? { WORKHORSE_FAILPOINTS: failpoints } : {}),
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    processes.push(proc);
    return proc;
  }

  async function stopAll(procs: ChildProcess[]): Promise<void> {
    await Promise.all(
      procs.map(async (p) => {
        if (p.exitCode !== null || p.signalCode !== null) return;
        const exited = new Promise((resolve) => p.once('exit', resolve));
        p.kill('SIGTERM');
        await exited;
      }),
    );
  }

  async function expectFamilies(q: string, parents: string[], children: number): Promise<void> {
    const { rows } = await pool.query<{ state: string; n: string }>(
      'SELECT o.state, count(*) AS n FROM workhorse.job_outcome o WHERE o.queue = $1 GROUP BY o.state',
      [q],
    );
    expect(rows).toEqual([{ state: 'succeeded', n: String(parents.length * (children + 1)) }]);
    const sums = await pool.query<{ result: { sum: number } }>('SELECT result FROM workhorse.job_outcome WHERE job_id = ANY ($1)', [parents]);
    const expected = Array.from({ length: children }, (_, i) => i * 2).reduce((a, b) => a + b, 0);
    expect(sums.rows.every((r) => r.result.sum === expected)).toBe(true);
    // Each parent's checkpoint stages ran exactly once, whatever happened to the processes.
    const stages = await pool.query<{ job_id: string; stage: string; n: string }>(
      'SELECT job_id, stage, count(*) AS n FROM public.side_effects WHERE job_id = ANY ($1) GROUP BY 1, 2',
      [parents],
    );
    expect(stages.rows).toHaveLength(parents.length * 2);
    expect(stages.rows.every((r) => r.n === '1')).toBe(true);
  }

  test('1,000 parents with 10 children each all finish exactly once, on three worker processes', async () => {
    const q = 'families';
    const parents: string[] = [];
    for (let i = 0; i < 1000; i += 500) {
      parents.push(...(await queue.enqueueMany(Array.from({ length: 500 }, () => ({ type: 'family.parent', payload: { children: 10 }, queue: q })))));
    }
    // No process dies here, so a stage that ran twice could only come from a lost lease: a lease
    // long enough for a loaded 2-core machine keeps "exactly once" about the protocol.
    const procs = ['fa', 'fb', 'fc'].map((name) => startWorker(name, q, undefined, 50, 15_000));
    try {
      await waitFor(
        async () => Number((await pool.query("SELECT count(*) AS n FROM workhorse.job_runtime WHERE queue = 'families'")).rows[0].n) === 0,
        240_000,
        'every family to finish',
      );
    } finally {
      await stopAll(procs);
    }
    await expectFamilies(q, parents, 10);
    // Every job ended once: one terminal event each.
    const terminal = await pool.query<{ n: string }>(
      "SELECT count(*) AS n FROM workhorse.job_event e JOIN workhorse.job j ON j.id = e.job_id WHERE j.queue = 'families' AND e.kind IN ('succeeded', 'failed', 'canceled')",
    );
    expect(Number(terminal.rows[0].n)).toBe(11_000);
  }, 300_000);

  test('worker processes killed (SIGKILL) at every park and resume point lose nothing and never rerun a checkpoint', async () => {
    const q = 'crashing';
    const parents = await queue.enqueueMany(Array.from({ length: 12 }, () => ({
      type: 'family.parent',
      payload: { children: 3 },
      queue: q,
      // A killed attempt is retried at once (the lease still has to run out first).
      retryPolicy: { kind: 'fixed', delayMs: 0 } as const,
    })));
    // One job at a time per process, so each kill interrupts one job at one point: a few kills at
    // each point (the park points, and the claim, start and completion of a replay or a child).
    const failpoints = 'before-park:0.25,after-park:0.25,after-claim:0.02,before-handler:0.02,after-handler:0.02,before-complete:0.02,after-complete:0.02';
    let kills = 0;
    let live: ChildProcess[] = [];
    let stopping = false;
    const keep = (name: string): void => {
      const proc = startWorker(`${name}-${kills}`, q, failpoints, 1);
      live.push(proc);
      proc.once('exit', (_code, signal) => {
        live = live.filter((p) => p !== proc);
        if (signal === 'SIGKILL' && !stopping) {
          kills++;
          keep(name);
        }
      });
    };
    keep('ka');
    keep('kb');
    try {
      await waitFor(
        async () => Number((await pool.query("SELECT count(*) AS n FROM workhorse.job_runtime WHERE queue = 'crashing'")).rows[0].n) === 0,
        240_000,
        'every family to finish despite the kills',
      );
    } catch (error) {
      const left = await pool.query('SELECT r.job_id, r.state, r.blockers, r.current_attempt, r.lease_expires_at, j.type FROM workhorse.job_runtime r JOIN workhorse.job j ON j.id = r.job_id WHERE r.queue = $1', [q]);
      throw new Error(`${(error as Error).message}; ${kills} kills; left: ${JSON.stringify(left.rows)}`);
    } finally {
      stopping = true;
      await stopAll([...live]);
    }
    expect(kills).toBeGreaterThan(0);
    await expectFamilies(q, parents, 3);
  }, 300_000);
});
