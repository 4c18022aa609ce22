/**
 * The dashboard needs nothing but the protocol: served through a login role that holds only the
 * library's grants (no superuser, no ownership), every page renders and every change goes
 * through, recorded with its actor.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Admin, grantAppRole, NonRetryableError, Pool, Queue, Worker } from '../../lib/core';
import { createDashboardHandler } from '../../lib/dashboard/handler';
import { waitFor } from '../support/wait';
import { FormClient } from './form-client';
import { useTestDatabase } from '../support/test-database';

const { db, roles } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: async () => {
    await new Promise((resolve) => server?.close(resolve));
    await rolePool?.end();
  },
});
let rolePool: Pool;
let server: Server;
let client: FormClient;

beforeAll(async () => {
  const role = await roles.create(db.url, 'wh_dashboard');
  await grantAppRole(db.pool, role.name);
  rolePool = new Pool({ connectionString: role.url, max: 5 });
  rolePool.on('error', () => undefined);

  const handler = createDashboardHandler({ admin: new Admin(rolePool), path: '/ops', authorize: () => true, actor: () => 'ops:least' });
  server = createServer((request, response) => void handler(request, response));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  client = new FormClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}/ops/`);
});

it('renders every page and carries out every change as a role with the library grants only', async () => {
  const queue = new Queue(db.pool);
  const dead = await queue.enqueue('sync.run', { n: 1 }, { queue: 'sync' });
  await new Worker(queue, { queues: ['sync'] })
    .handle('sync.run', () => {
      throw new NonRetryableError('remote down');
    })
    .runOnce();
  const waiting = await queue.enqueue('sync.run', { n: 2 }, { queue: 'sync', runAt: new Date(Date.now() + 60_000) });
  const parked = await queue.enqueue('sync.approve', {}, { queue: 'sync-approvals' });
  await new Worker(queue, { queues: ['sync-approvals'] })
    .handle('sync.approve', async (_payload, ctx) => ctx.waitForHuman('go', { choices: ['yes', 'no'] }))
    .runOnce();

  await queue.syncSchedules('least', [{ key: 'sync.nightly', type: 'sync.run', cron: '0 4 * * *', options: { queue: 'sync' } }]);
  const worker = new Worker(queue, { queues: ['least-idle'], heartbeatMs: 100, tickMs: 100 });
  const running = worker.run();

  for (const path of ['', '?window=24h', 'jobs', 'jobs?state=failed&after=2020-01-01T00:00', `jobs/${dead}`, `jobs/${dead}/payload.json`, 'dead-letters', 'queues', 'waits', `jobs/${parked}`, 'schedules', 'schedule?namespace=least&key=sync.nightly', 'workers', 'timings', 'timings?window=7d&by=type', 'jobs?tag=x', 'jobs?payload=%7B%22n%22%3A1%7D', 'jobs?error=remote', `api/jobs/${dead}`, 'api/jobs', 'api/queues', 'api/health']) {
    const page = await client.get(path);
    expect([path, page.status]).toEqual([path, 200]);
  }
  expect((await client.get('')).text).not.toContain('Too many jobs');
  expect((await client.get('timings')).text).toContain('remote down');
  expect((await client.get('jobs?payload=%7B%22n%22%3A1%7D')).text).toContain(dead);

  expect((await client.post('queues', { do: 'pause', queue: 'sync', reason: 'least privilege' })).status).toBe(303);
  expect((await client.post('queues', { do: 'resume', queue: 'sync', reason: 'done' })).status).toBe(303);
  expect((await client.post(`jobs/${waiting}`, { do: 'cancel', reason: 'not needed' })).status).toBe(303);
  const preview = await client.post('dead-letters', { do: 'preview-all', queue: 'sync' });
  expect(preview.status).toBe(200);
  const request = /name="request" value="([^"]+)"/.exec(preview.text)?.[1] ?? '';
  expect((await client.post('dead-letters', { do: 'redrive', id: dead, request, reason: 'remote back' })).status).toBe(303);
  const schedule = { namespace: 'least', key: 'sync.nightly' };
  expect((await client.post('schedules', { do: 'pause', ...schedule, reason: 'freeze' })).location).toBe('./schedules?notice=schedule-paused');
  expect((await client.post('schedules', { do: 'resume', ...schedule, reason: 'thaw' })).location).toBe('./schedules?notice=schedule-resumed');
  expect((await client.post('schedules', { do: 'trigger', ...schedule, reason: 'now' })).status).toBe(303);
  expect((await client.post('queues', { do: 'limits', queue: 'sync', concurrency: '2', reason: 'cap' })).location).toBe('./queues?notice=limits-set');
  await waitFor(async () => (await new Admin(db.pool).listWorkers()).some((w) => w.workerId === worker.workerId), 10_000, 'the worker to register');
  expect((await client.post('workers', { do: 'drain', worker: worker.workerId, reason: 'maintenance' })).location).toBe('./workers?notice=drain-requested');
  await worker.stop();
  await running;

  const decision = { do: 'decide', job: parked, name: 'go', decision: 'yes', request: '00000000-0000-4000-8000-000000000000', reason: 'checked' };
  expect((await client.post('waits', decision)).status).toBe(303);

  const admin = new Admin(db.pool);
  expect((await admin.getJob(parked))?.state).toBe('ready');
  expect((await admin.getJob(dead))?.redrivenTo).toHaveLength(1);
  expect((await admin.getJob(waiting))?.error).toMatchObject({ name: 'Canceled', actor: 'ops:least' });
  expect((await admin.listQueues()).find((q) => q.queue === 'sync')).toMatchObject({ paused: false, changedBy: 'ops:least', concurrency: 2 });
  expect((await admin.getScheduleHistory('sync.nightly', { namespace: 'least' })).map((entry) => [entry.change, entry.actor])).toEqual([
    ['triggered', 'ops:least'],
    ['resumed', 'ops:least'],
    ['paused', 'ops:least'],
    ['created', null],
  ]);
});
