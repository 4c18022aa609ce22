/**
 * The worker capability reaches only what the jobs it holds need (issue 30, defect 8), tried as
 * the documented worker role (test/support/roles.ts, grantRole 'worker'): it reads the
 * dependencies of a job only while it holds that job under a live lease and fence; it reports and
 * unregisters only the registry row it registered (bound by the secret its registration
 * returned); no report clears an operator's drain. Each refusal is a typed error (SQLSTATE
 * P1040, NotYoursError) that reads or writes nothing; the normal paths still work. The previous
 * release's `_v1` calls stay callable, restricted the same way.
 */
import { Admin, grantRole, NotYoursError, Queue, Worker, fromPgError } from '../../lib/core';
import { claimOne } from '../support/protocol';
import { poolFor } from '../support/roles';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';
import type { Pool } from 'pg';

const { db, roles } = useTestDatabase({
  beforeDrop: async () => {
    for (const pool of opened.splice(0)) await pool.end().catch(() => undefined);
  },
});
const opened: Pool[] = [];

async function rolePool(capability: 'producer' | 'worker' | 'operator'): Promise<Pool> {
  const role = await roles.create(db.url, `wh_cap_${capability[0]}`);
  await grantRole(db.pool, role.name, capability);
  const pool = poolFor(role.url, 3);
  opened.push(pool);
  return pool;
}

/** The typed error a statement fails with. */
async function refusal(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return fromPgError(error);
  }
  throw new Error('expected the statement to be refused');
}

const info = (startedAt = '2026-12-01T00:00:00Z') =>
  JSON.stringify({ host: 'h', pid: 7, queues: ['q'], concurrency: 1, version: 'v', startedAt, periodMs: 60_000 });

async function registryRows(): Promise<{ worker_id: string; drain: boolean }[]> {
  const { rows } = await db.pool.query<{ worker_id: string; drain: boolean }>(
    'SELECT worker_id, drain_requested_at IS NOT NULL AS drain FROM workhorse.worker_registry ORDER BY worker_id',
  );
  return rows;
}

describe('dependencies', () => {
  it("a worker reads only the dependencies of a job it holds under a live fence; another job's are refused, typed", async () => {
    const producer = new Queue(await rolePool('producer'));
    const worker = await rolePool('worker');
    const q = 'cap-deps';
    const [first, second] = await producer.enqueueMany([
      { type: 'cap.secret', payload: 1, queue: q },
      { type: 'cap.dependent', payload: 2, queue: q, dependsOn: [0] },
    ]);
    const held = await claimOne(worker, q, { workerId: 'w-a' });
    expect(held.jobId).toBe(first);
    await worker.query("SELECT workhorse.complete_v1($1, $2, $3, '{\"card\":\"4242\"}'::jsonb)", [held.jobId, held.workerId, held.fence]);
    const dependent = await claimOne(worker, q, { workerId: 'w-b' });
    expect(dependent.jobId).toBe(second);

    // The holder reads them.
    const mine = await worker.query('SELECT job_id, state, result FROM workhorse.dependencies_v2($1, $2, $3)', [second, 'w-b', dependent.fence]);
    expect(mine.rows).toEqual([{ job_id: first, state: 'succeeded', result: { card: '4242' } }]);
    // Another worker id, a stale fence, or a job no one holds: refused, nothing read.
    for (const [workerId, fence] of [['w-a', dependent.fence], ['w-b', String(Number(dependent.fence) + 1)]]) {
      const error = await refusal(worker.query('SELECT * FROM workhorse.dependencies_v2($1, $2, $3)', [second, workerId, fence]));
      expect(error).toBeInstanceOf(NotYoursError);
      expect((error as NotYoursError).field).toBe('jobId');
    }
    // The previous release's v1 names no worker: it answers only while the job is held under a
    // live lease, so a finished (or waiting) job's prerequisites are refused.
    expect((await worker.query('SELECT job_id FROM workhorse.dependencies_v1($1)', [second])).rows).toEqual([{ job_id: first }]);
    await worker.query('SELECT workhorse.complete_v1($1, $2, $3, null)', [second, 'w-b', dependent.fence]);
    expect(await refusal(worker.query('SELECT * FROM workhorse.dependencies_v1($1)', [second]))).toBeInstanceOf(NotYoursError);
    expect(await refusal(worker.query('SELECT * FROM workhorse.dependencies_v2($1, $2, $3)', [second, 'w-b', dependent.fence]))).toBeInstanceOf(
      NotYoursError,
    );
  });

  it('ctx.dependencies() still works for the handler, as the worker role', async () => {
    const producer = new Queue(await rolePool('producer'));
    const admin = new Admin(db.pool);
    const q = 'cap-deps-ctx';
    const [, second] = await producer.enqueueMany([
      { type: 'cap.one', payload: 1, queue: q },
      { type: 'cap.two', payload: 2, queue: q, dependsOn: [0] },
    ]);
    const worker = new Worker(new Queue(await rolePool('worker')), { queues: [q], pollMs: 50, tickMs: 200 });
    worker.handle('cap.one', (n: number) => n * 10);
    worker.handle('cap.two', async (n: number, ctx) => ((await ctx.dependencies())[0].result as number) + n);
    const done = worker.run();
    try {
      await waitFor(async () => (await admin.getJob(second))?.state === 'succeeded', 30_000, 'the dependent to succeed');
    } finally {
      await worker.stop();
      await done;
    }
    expect((await admin.getJob(second))?.result).toBe(12);
  });
});

describe('the registry', () => {
  afterEach(() => db.pool.query('DELETE FROM workhorse.worker_registry'));

  it("a worker role cannot take over a live worker's id, report for it, unregister it, or clear its drain", async () => {
    const worker = await rolePool('worker');
    const intruder = await rolePool('worker');
    const admin = new Admin(db.pool);
    const registered = await worker.query<{ drain: boolean; secret: string }>('SELECT * FROM workhorse.report_worker_v2($1, $2, 0, NULL)', [
      'w-live',
      info(),
    ]);
    const secret = registered.rows[0].secret;
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    expect(await admin.drainWorker('w-live', { actor: 'alice' })).toBe('requested');

    // Register again under the live id, report with a guessed secret, unregister: refused, typed.
    for (const role of [worker, intruder]) {
      for (const [sql, args] of [
        ['SELECT * FROM workhorse.report_worker_v2($1, $2, 0, NULL)', ['w-live', info('2026-12-01T01:00:00Z')]],
        ['SELECT * FROM workhorse.report_worker_v2($1, $2, 0, $3)', ['w-live', info(), 'guess']],
        ['SELECT workhorse.unregister_worker_v2($1, $2)', ['w-live', 'guess']],
        ['SELECT workhorse.unregister_worker_v2($1, NULL)', ['w-live']],
        // The previous release's calls: a new startedAt used to clear the drain.
        ['SELECT workhorse.report_worker_v1($1, $2, 0)', ['w-live', info('2026-12-01T02:00:00Z')]],
      ] as const) {
        const error = await refusal(role.query(sql, [...args]));
        expect([sql, error]).toEqual([sql, expect.any(NotYoursError)]);
      }
      expect((await role.query('SELECT workhorse.unregister_worker_v1($1) AS found', ['w-live'])).rows).toEqual([{ found: false }]);
    }
    expect(await registryRows()).toEqual([{ worker_id: 'w-live', drain: true }]);
    expect((await admin.listWorkers())[0]).toMatchObject({ workerId: 'w-live', drainRequestedBy: 'alice', startedAt: new Date('2026-12-01T00:00:00Z') });

    // Its own reports work and keep the drain; its own unregistering removes the row.
    const report = await worker.query('SELECT * FROM workhorse.report_worker_v2($1, $2, 1, $3)', ['w-live', info('2026-12-01T03:00:00Z'), secret]);
    expect(report.rows).toEqual([{ drain: true, secret: null }]);
    expect((await worker.query('SELECT workhorse.unregister_worker_v2($1, $2) AS found', ['w-live', secret])).rows).toEqual([{ found: true }]);
    expect(await registryRows()).toEqual([]);
  });

  it("the previous release's report registers and updates only its own role's rows, and never clears a drain", async () => {
    const old = await rolePool('worker');
    const other = await rolePool('worker');
    const admin = new Admin(db.pool);
    expect((await old.query('SELECT workhorse.report_worker_v1($1, $2, 0) AS drain', ['w-old', info()])).rows).toEqual([{ drain: false }]);
    expect(await admin.drainWorker('w-old')).toBe('requested');
    // A restart under the fixed id (a new startedAt) keeps the drain now.
    expect((await old.query('SELECT workhorse.report_worker_v1($1, $2, 0) AS drain', ['w-old', info('2026-12-01T05:00:00Z')])).rows).toEqual([
      { drain: true },
    ]);
    expect(await refusal(other.query('SELECT workhorse.report_worker_v1($1, $2, 0)', ['w-old', info()]))).toBeInstanceOf(NotYoursError);
    expect((await other.query('SELECT workhorse.unregister_worker_v1($1) AS found', ['w-old'])).rows).toEqual([{ found: false }]);
    expect((await old.query('SELECT workhorse.unregister_worker_v1($1) AS found', ['w-old'])).rows).toEqual([{ found: true }]);
  });

  it("a gone worker's id may be registered again, a new life without the drain", async () => {
    const worker = await rolePool('worker');
    const admin = new Admin(db.pool);
    const gone = JSON.stringify({ host: 'h', pid: 1, queues: ['q'], concurrency: 1, version: 'v', startedAt: '2026-12-01T00:00:00Z', periodMs: 20 });
    await worker.query('SELECT * FROM workhorse.report_worker_v2($1, $2, 0, NULL)', ['w-gone', gone]);
    expect(await admin.drainWorker('w-gone')).toBe('requested');
    await waitFor(async () => (await admin.listWorkers())[0]?.status === 'gone', 5_000, 'the worker to be gone');
    const again = await worker.query<{ drain: boolean; secret: string }>('SELECT * FROM workhorse.report_worker_v2($1, $2, 0, NULL)', ['w-gone', info()]);
    expect(again.rows[0]).toMatchObject({ drain: false, secret: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(await registryRows()).toEqual([{ worker_id: 'w-gone', drain: false }]);
  });

  it('a Worker running as the worker role registers, reports, drains when asked, and unregisters', async () => {
    const admin = new Admin(db.pool);
    const worker = new Worker(new Queue(await rolePool('worker')), { queues: ['cap-reg'], heartbeatMs: 100, tickMs: 100 });
    const done = worker.run();
    try {
      await waitFor(async () => (await admin.listWorkers()).some((w) => w.workerId === worker.workerId), 10_000, 'the worker to register');
      expect(await admin.drainWorker(worker.workerId)).toBe('requested');
      await waitFor(() => worker.isDraining, 10_000, 'the worker to learn of the drain');
    } finally {
      await worker.stop();
      await done;
    }
    expect(await registryRows()).toEqual([]);
  });
});
