'use strict';
/**
 * pg-boss (newest release for Node 20) through its documented API: `send` / `insert` to
 * produce, `work(queue, { batchSize, pollingIntervalSeconds }, handler)` to consume.
 *
 * pg-boss has no LISTEN: a work loop fetches up to `batchSize` jobs, runs them, and then
 * sleeps out the rest of its polling interval (default 2 s, minimum 0.5 s) whether or not
 * more jobs are waiting. The benchmark gives it its most favourable allowed interval (0.5 s)
 * and fetches `concurrency` jobs per round (`batchSize: concurrency`, the jobs of a batch
 * run at once), so a drain is poll-bound at about 2 x concurrency jobs/s.
 */
const POOL_MAX = 10;
const QUEUE = 'noop';
const POLLING_INTERVAL_SECONDS = 0.5;

function Boss() {
  const mod = require('pg-boss');
  return mod.default ?? mod;
}

async function started(url, max, onError) {
  const PgBoss = Boss();
  const boss = new PgBoss({ connectionString: url, max });
  boss.on('error', (error) => onError && onError(error.message));
  await boss.start();
  return boss;
}

module.exports = {
  schema: 'pgboss',
  POLLING_INTERVAL_SECONDS,
  version() {
    return require('pg-boss/package.json').version;
  },

  async install({ url }) {
    const boss = await started(url, 2);
    try {
      await boss.createQueue(QUEUE);
    } finally {
      await boss.stop({ graceful: false, wait: true });
    }
  },

  async preload({ url, count, parallel = 1 }) {
    const boss = await started(url, Math.max(2, parallel));
    try {
      let next = 0;
      const lane = async () => {
        while (next < count) {
          const from = next;
          next = Math.min(count, next + 1000);
          const batch = [];
          for (let i = from; i < next; i++) batch.push({ name: QUEUE, data: { i } });
          await boss.insert(batch);
        }
      };
      await Promise.all(Array.from({ length: parallel }, lane));
    } finally {
      await boss.stop({ graceful: false, wait: true });
    }
  },

  pendingSql: `SELECT count(*)::int AS n FROM pgboss.job WHERE name = '${QUEUE}' AND state IN ('created', 'retry', 'active')`,

  async startWorker({ url, concurrency, onJob, onError }) {
    const boss = await started(url, POOL_MAX, onError);
    await boss.work(QUEUE, { batchSize: concurrency, pollingIntervalSeconds: POLLING_INTERVAL_SECONDS }, async (jobs) => {
      await Promise.all(
        jobs.map(async (job) => {
          onJob(job.data);
        }),
      );
    });
    return {
      async stop() {
        await boss.stop({ graceful: true, wait: true, timeout: 10_000 });
      },
    };
  },

  async producer({ url, poolMax }) {
    const boss = await started(url, poolMax);
    return {
      enqueue: (payload) => boss.send(QUEUE, payload),
      enqueueBatch: (payloads) => boss.insert(payloads.map((data) => ({ name: QUEUE, data }))),
      close: () => boss.stop({ graceful: false, wait: true }),
    };
  },
};
