/**
 * The registry of live workers: a running worker is listed with what it runs and how many jobs it
 * holds, leaves the registry when it stops, turns `gone` when its reports stop; an operator's
 * drain makes it stop claiming while it finishes what it holds. Also `workhorse workers
 * list|drain`.
 */
import { hostname } from 'node:os';
import { Worker, type WorkerInfo } from '../../lib/core';
import { packageVersion } from '../../lib/core/package-version';
import { cli, documentOf, errorOf, viaJson } from '../cli/cli-harness';
import { useTestDatabase } from '../support/test-database';
import { gate, waitFor } from '../support/wait';

const { db, pool, queue, admin } = useTestDatabase({
  beforeDrop: () => Promise.all([...running].map((w) => w.stop())),
});
const running = new Set<Worker>();

function start(worker: Worker): Promise<void> {
  running.add(worker);
  return worker.run().finally(() => running.delete(worker));
}

async function workerInfo(workerId: string): Promise<WorkerInfo | undefined> {
  return (await admin.listWorkers()).find((w) => w.workerId === workerId);
}

it('a running worker is listed with where it runs and what it holds, and leaves the registry when it stops', async () => {
  const hold = gate();
  const worker = new Worker(queue, { queues: ['reg-a', 'reg-b'], concurrency: 3, leaseMs: 3000, heartbeatMs: 100, tickMs: 100 }).handle(
    'hold',
    () => hold.promise,
  );
  const done = start(worker);
  const id = await queue.enqueue('hold', {}, { queue: 'reg-a' });
  await waitFor(async () => (await workerInfo(worker.workerId))?.inFlight === 1, 10_000, 'the worker to report the job it holds');
  const info = (await workerInfo(worker.workerId)) as WorkerInfo;
  expect(info).toMatchObject({
    status: 'running',
    host: hostname(),
    pid: process.pid,
    queues: ['reg-a', 'reg-b'],
    concurrency: 3,
    inFlight: 1,
    version: packageVersion(),
    drainRequestedAt: null,
  });
  expect(info.lastSeenAt.getTime()).toBeGreaterThanOrEqual(info.startedAt.getTime());
  hold.open();
  await waitFor(async () => (await admin.getJob(id))?.state === 'succeeded', 10_000, 'the job to succeed');
  await worker.stop();
  await done;
  expect(await workerInfo(worker.workerId)).toBeUndefined();
});

it('a drained worker claims no more jobs, finishes the ones it holds, and is listed as draining, then drained', async () => {
  const hold = gate();
  const worker = new Worker(queue, { queues: ['drain-q'], concurrency: 5, leaseMs: 3000, heartbeatMs: 100, tickMs: 100 }).handle(
    'hold',
    () => hold.promise,
  );
  const draining: number[] = [];
  worker.on(['worker.draining'], (event) => draining.push(event.activeCount));
  const done = start(worker);
  const held = await queue.enqueue('hold', {}, { queue: 'drain-q' });
  await waitFor(async () => (await admin.getJob(held))?.state === 'active', 10_000, 'the first job to be claimed');
  await waitFor(() => workerInfo(worker.workerId), 10_000, 'the worker to register');

  expect(await admin.drainWorker(worker.workerId, { actor: 'alice', reason: 'host maintenance' })).toBe('requested');
  expect(await admin.drainWorker(worker.workerId, { actor: 'bob' })).toBe('already_requested');
  await waitFor(() => worker.isDraining, 10_000, 'the worker to learn of the drain');
  expect(draining).toEqual([1]);
  expect(await workerInfo(worker.workerId)).toMatchObject({ status: 'draining', drainRequestedBy: 'alice', drainReason: 'host maintenance' });

  // Free slots and a ready job: a worker that still claimed would take it within a poll.
  const waiting = await queue.enqueue('hold', {}, { queue: 'drain-q' });
  hold.open();
  await waitFor(async () => (await admin.getJob(held))?.state === 'succeeded', 10_000, 'the held job to finish');
  await waitFor(async () => (await workerInfo(worker.workerId))?.status === 'drained', 10_000, 'the worker to be listed drained');
  expect((await workerInfo(worker.workerId))?.inFlight).toBe(0);
  expect((await admin.getJob(waiting))?.state).toBe('ready');
  expect(worker.isRunning).toBe(true);
  await worker.stop();
  await done;
  await admin.cancel(waiting);
});

it('a worker whose reports stop is listed as gone after three missed periods', async () => {
  const info = { host: 'h1', pid: 1, queues: ['q'], concurrency: 1, version: '0.0.0', startedAt: new Date().toISOString(), periodMs: 50 };
  await pool.query('SELECT workhorse.report_worker_v1($1, $2, 0)', ['silent', JSON.stringify(info)]);
  expect((await workerInfo('silent'))?.status).toBe('running');
  await waitFor(async () => (await workerInfo('silent'))?.status === 'gone', 5_000, 'the silent worker to be listed gone');
  await pool.query("DELETE FROM workhorse.worker_registry WHERE worker_id = 'silent'");
});

it('a worker that starts again under its fixed id after the previous run left does not inherit its drain; a report never clears one', async () => {
  const info = (startedAt: string) => JSON.stringify({ host: 'h', pid: 2, queues: ['q'], concurrency: 1, version: 'v', startedAt, periodMs: 1000 });
  const report = async (startedAt: string, secret: string | null) =>
    (await pool.query<{ drain: boolean; secret: string | null }>('SELECT * FROM workhorse.report_worker_v2($1, $2, 0, $3)', ['fixed', info(startedAt), secret]))
      .rows[0];
  const { secret } = await report('2026-12-01T00:00:00Z', null);
  expect(await admin.drainWorker('fixed')).toBe('requested');
  expect(await report('2026-12-01T00:00:00Z', secret)).toEqual({ drain: true, secret: null });
  // A report of the same run under another startedAt keeps the drain.
  expect(await report('2026-12-01T00:05:00Z', secret)).toEqual({ drain: true, secret: null });
  expect((await pool.query('SELECT workhorse.unregister_worker_v2($1, $2) AS found', ['fixed', secret])).rows).toEqual([{ found: true }]);
  expect(await report('2026-12-01T00:10:00Z', null)).toMatchObject({ drain: false });
  await pool.query("DELETE FROM workhorse.worker_registry WHERE worker_id = 'fixed'");
});

it('drainWorker refuses a bad id or actor before writing, and answers not_found for an unknown worker', async () => {
  await expect(admin.drainWorker('')).rejects.toThrow('workerId: must be a string of 1 to 200 characters');
  await expect(admin.drainWorker('w', { actor: 'x'.repeat(201) })).rejects.toThrow('actor');
  expect(await admin.drainWorker('nobody')).toBe('not_found');
});

describe('workhorse workers', () => {
  it('list --json prints what admin.listWorkers returns; drain asks once, then reports the repeat; an unknown id exits 1', async () => {
    const env = { DATABASE_URL: db.url };
    const info = JSON.stringify({ host: 'h3', pid: 3, queues: ['q'], concurrency: 4, version: 'v', startedAt: new Date().toISOString(), periodMs: 60_000 });
    await pool.query('SELECT workhorse.report_worker_v1($1, $2, 2)', ['cli-w', info]);
    expect(documentOf(await cli(['workers', 'list', '--json'], env))).toEqual(viaJson(await admin.listWorkers()));
    const text = await cli(['workers', 'list'], env);
    expect(text.stdout).toMatch(/^WORKER +STATUS +HOST/);
    expect(text.stdout).toMatch(/cli-w +running +h3 +3 +q +4 +2 /);

    expect(documentOf(await cli(['workers', 'drain', 'cli-w', '--actor', 'alice', '--json'], env))).toEqual({ workerId: 'cli-w', result: 'requested' });
    expect((await cli(['workers', 'drain', 'cli-w'], env)).stdout).toBe('Worker cli-w was already asked to drain; nothing changed.\n');
    expect((await workerInfo('cli-w'))?.drainRequestedBy).toBe('alice');
    expect(errorOf(await cli(['workers', 'drain', 'nobody'], env), 1)).toMatch(/^workhorse: no worker nobody in the registry/);
    await pool.query("DELETE FROM workhorse.worker_registry WHERE worker_id = 'cli-w'");
  });
});
