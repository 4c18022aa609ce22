/**
 * What twenty open dashboards cost the database: twenty simulated viewers refresh the live pages
 * (jobs, queues, workers, a job) once a second for a few seconds, as dashboard.js does (the
 * `X-Workhorse-Live` header), and every statement the dashboard's pool sends to the database is
 * counted. Refreshes share one read per page and interval across viewers; reloads (no header)
 * read for each viewer. Prints both rates.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'pg';
import { Admin, NonRetryableError, Queue, Worker } from '../../lib/core';
import { createDashboardHandler } from '../../lib/dashboard/handler';
import { LIVE_READ_TTL_MS, sharedReads } from '../../lib/dashboard/shared-reads';
import { useTestDatabase } from '../support/test-database';

const { db } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: async () => {
    await close?.();
    await pool?.end();
  },
});

const VIEWERS = 20;
const SECONDS = 4;

let pool: Pool;
let origin: string;
let close: () => Promise<void>;
let jobId: string;
/** Statements the dashboard's pool sent. */
let statements = 0;

beforeAll(async () => {
  const queue = new Queue(db.pool);
  const ids = await queue.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ type: 'mail.send', payload: { i }, queue: 'mail' })));
  jobId = ids[0];
  await new Worker(queue, { queues: ['mail'] })
    .handle('mail.send', () => {
      throw new NonRetryableError('mailbox unavailable');
    })
    .runOnce();
  // The dashboard's own pool: its transactions are the ones counted.
  pool = new Pool({ connectionString: db.url, max: 10 });
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    Object.assign(client, { query: (...args: unknown[]) => ((statements += 1), query(...args)) });
  });
  const handler = createDashboardHandler({ admin: new Admin(pool), path: '/workhorse', authorize: () => true });
  const server = createServer((request, response) => void handler(request, response));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Statements per second the database ran while VIEWERS viewers refreshed every second. */
async function measure(live: boolean): Promise<number> {
  const paths = ['jobs', 'queues', 'workers', `jobs/${jobId}`];
  const headers: Record<string, string> = live ? { 'X-Workhorse-Live': '1' } : {};
  const start = statements;
  const began = Date.now();
  await Promise.all(
    Array.from({ length: VIEWERS }, async (_, viewer) => {
      for (let second = 0; second < SECONDS; second += 1) {
        const turn = Date.now();
        const path = paths[(viewer + second) % paths.length];
        const response = await fetch(`${origin}/workhorse/${path}`, { headers });
        expect(response.status).toBe(200);
        await response.text();
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, 1_000 - (Date.now() - turn))));
      }
    }),
  );
  return (statements - start) / ((Date.now() - began) / 1000);
}

/** Statements one viewer's read of the four pages costs. */
async function oneSet(): Promise<number> {
  const start = statements;
  for (const path of ['jobs', 'queues', 'workers', `jobs/${jobId}`]) await (await fetch(`${origin}/workhorse/${path}`)).text();
  return statements - start;
}

it('costs one read set per interval for 20 viewers refreshing, not one per viewer', async () => {
  const set = await oneSet();
  const reloads = await measure(false);
  const refreshes = await measure(true);
  // Each page's reads once per LIVE_READ_TTL_MS however many viewers refresh it (plus one set of slack for the edges).
  const bound = (set * 1000) / LIVE_READ_TTL_MS + set / SECONDS;
  console.log(`one set of the 4 pages: ${set} statements; ${VIEWERS} viewers, 1 refresh/s each: ${reloads.toFixed(1)} statements/s read fresh, ${refreshes.toFixed(1)} statements/s with shared reads (bound ${bound.toFixed(1)})`);
  expect(refreshes).toBeLessThan(reloads / 4);
  expect(refreshes).toBeLessThanOrEqual(bound);
}, 60_000);

it('shares reads only: a change through the shared Admin is refused and writes nothing', async () => {
  const admin = new Admin(pool);
  const shared = sharedReads(admin, 60_000);
  const id = await new Queue(db.pool).enqueue('mail.send', { n: 'shared' }, { queue: 'shared' });
  await expect(shared.cancel(id, { actor: 'live', reason: 'refresh' })).rejects.toThrow('a live refresh of the dashboard may not call cancel');
  await expect(shared.pauseQueue('shared')).rejects.toThrow('may not call pauseQueue');
  expect((await admin.getJob(id))?.state).toBe('ready');
  expect((await admin.listQueues()).find((q) => q.queue === 'shared')?.paused).toBe(false);
  // Within the period, every caller gets the one read; Admin itself reads fresh.
  const first = await shared.getJob(id);
  await admin.cancel(id, { actor: 'test', reason: 'changed meanwhile' });
  expect(await shared.getJob(id)).toBe(first);
  expect((await admin.getJob(id))?.state).toBe('canceled');
});
