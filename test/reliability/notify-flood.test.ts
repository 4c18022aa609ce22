/**
 * Wake-up floods (issue 15, item 2). Any role that can connect may NOTIFY the workers' channel;
 * PostgreSQL has no privilege for it. A flood of notifications for an idle worker's queue (here
 * 4,000, each in a transaction of its own, from four connections; the issue saw 60,000 in 5 s)
 * once made the worker send about one claim per notification; now each lane keeps at most one
 * claim in flight and a dry lane claims on a notification only within its budget (a burst of 5,
 * then 5 per second), so the flood costs a few claims per second. Notifications of real work are
 * not held back: a claim that finds jobs gives its budget back, so jobs enqueued one by one are
 * claimed on their notifications alone (polling is set to a minute here), during a flood too.
 *
 * The flood is kept small: every listening backend of the cluster (other test files' workers
 * too) is woken for each notifying commit, so a large one slows the whole test server. */
import { Client, Pool } from 'pg';
import { Admin, Queue, Worker } from '../../lib/core';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { db } = useTestDatabase({
  beforeDrop: () => workerPool?.end(),
  afterEachTest: async () => {
    for (const { worker, done } of running.splice(0)) {
      await worker.stop();
      await done;
    }
  },
});
let workerPool: Pool;
let claims = 0;
const running: { worker: Worker; done: Promise<void> }[] = [];

beforeAll(async () => {
  workerPool = new Pool({ connectionString: db.url, max: 5 });
  workerPool.on('error', () => undefined);
  // Counts the worker's claim round trips (complete_and_claim_v1), whatever form they take.
  const query = workerPool.query.bind(workerPool) as (...args: unknown[]) => unknown;
  (workerPool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text;
    if (text?.includes('complete_and_claim_v1')) claims++;
    return query(...args);
  };
});

/** A worker on `queue` that only notifications wake (its poll is a minute away). */
async function idleWorker(queue: string): Promise<Worker> {
  const worker = new Worker(new Queue(workerPool), { queues: [queue], concurrency: 4, pollMs: 60_000, tickMs: 60_000 }).handle(
    'flood.real',
    async () => 'done',
  );
  running.push({ worker, done: worker.run() });
  // Started: its first claim found the queue dry and LISTEN is connected.
  await waitFor(async () => {
    const { rows } = await db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN workhorse_jobs'",
    );
    return claims > 0 && rows[0].n > 0;
  }, 15_000, 'the worker to listen');
  return worker;
}

/**
 * `count` notifications for `queue`, each in a transaction of its own, from four connections at
 * once (as a hostile client would send them); resolves when all are sent.
 */
async function flood(queue: string, count: number): Promise<void> {
  const senders = await Promise.all(
    Array.from({ length: 4 }, async () => {
      const client = new Client({ connectionString: db.url });
      client.on('error', () => undefined);
      await client.connect();
      // Each notification commits a transaction, and PostgreSQL serialises the commits of all
      // notifying transactions in the cluster: without this, a flood on a durable server holds
      // up every other test's enqueues and claims for as long as its WAL flushes take.
      await client.query('SET synchronous_commit = off');
      return client;
    }),
  );
  try {
    await Promise.all(
      senders.map(async (client) => {
        for (let i = 0; i < count / senders.length; i++) await client.query("SELECT pg_notify('workhorse_jobs', $1)", [queue]);
      }),
    );
  } finally {
    await Promise.all(senders.map((client) => client.end()));
  }
}

it('a flood of 4,000 notifications for an idle queue costs a few claims per second', async () => {
  await idleWorker('flood-idle');
  const admin = new Admin(db.pool);
  const before = claims;
  const started = Date.now();
  await flood('flood-idle', 4_000);
  // A job after the flood: its notification comes after all of the flood's on the worker's LISTEN
  // connection, so once it ran the worker has read every one of them.
  const sentinel = await new Queue(db.pool).enqueue('flood.real', {}, { queue: 'flood-idle' });
  await waitFor(async () => (await admin.getJob(sentinel))?.state === 'succeeded', 30_000, 'the job after the flood to run');
  const seconds = (Date.now() - started) / 1000;
  const made = claims - before;
  // The budget (a burst of 5, then 5 per second), the sentinel's claim and the round that
  // records its completion.
  expect(made).toBeLessThanOrEqual(5 + Math.ceil(5 * seconds) + 2);
});

it('jobs enqueued one by one are claimed on their notifications alone, flood or not', async () => {
  await idleWorker('flood-real');
  const queue = new Queue(db.pool);
  const admin = new Admin(db.pool);
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) ids.push(await queue.enqueue('flood.real', { i }, { queue: 'flood-real' }));
  await waitFor(async () => (await Promise.all(ids.map((id) => admin.getJob(id)))).every((j) => j?.state === 'succeeded'), 30_000, 'every job to run');

  const flooding = flood('flood-real', 4_000);
  const during = await queue.enqueue('flood.real', { during: true }, { queue: 'flood-real' });
  await waitFor(async () => (await admin.getJob(during))?.state === 'succeeded', 30_000, 'the job enqueued during the flood to run');
  await flooding;
});
