'use strict';
/**
 * nestjs-workhorse through its core clients: `Queue.enqueue` / `Queue.enqueueMany` to produce,
 * `new Worker(queue, { concurrency })` with its defaults (LISTEN on, pollMs 1000) to consume.
 */
const path = require('node:path');

const POOL_MAX = 10;

function core(libDir) {
  return require(path.join(libDir, 'lib', 'core', 'index.js'));
}

function makePool(libDir, url, max = POOL_MAX) {
  const pool = new (core(libDir).Pool)({ connectionString: url, max });
  pool.on('error', () => undefined);
  return pool;
}

module.exports = {
  schema: 'workhorse',
  version(root) {
    return require(path.join(root, 'package.json')).version;
  },

  async install({ libDir, url }) {
    const pool = makePool(libDir, url, 2);
    try {
      await core(libDir).installSchema(pool);
    } finally {
      await pool.end();
    }
  },

  /** Preloads `count` no-op jobs (payload {i}) with the batch API, `parallel` batches at a time. */
  async preload({ libDir, url, count, parallel = 1 }) {
    const pool = makePool(libDir, url, parallel);
    const queue = new (core(libDir).Queue)(pool);
    try {
      let next = 0;
      const lane = async () => {
        while (next < count) {
          const from = next;
          next = Math.min(count, next + 1000);
          const batch = [];
          for (let i = from; i < next; i++) batch.push({ type: 'noop', payload: { i } });
          await queue.enqueueMany(batch);
        }
      };
      await Promise.all(Array.from({ length: parallel }, lane));
    } finally {
      await pool.end();
    }
  },

  pendingSql: 'SELECT count(*)::int AS n FROM workhorse.job_runtime',

  async startWorker({ libDir, url, concurrency, onJob, onError, options = {} }) {
    const { Queue, Worker } = core(libDir);
    const pool = makePool(libDir, url);
    const worker = new Worker(new Queue(pool), { concurrency, ...options });
    worker.handle('noop', async (payload) => {
      onJob(payload);
    });
    // Errors only: the per-job events are not built when nobody listens to them.
    worker.on(['worker.error'], (event) => onError(`${event.during}: ${event.error && event.error.message}`));
    const running = worker.run();
    return {
      async stop() {
        await worker.stop();
        await running;
        await pool.end();
      },
    };
  },

  async producer({ libDir, url, poolMax }) {
    const pool = makePool(libDir, url, poolMax);
    const queue = new (core(libDir).Queue)(pool);
    return {
      enqueue: (payload) => queue.enqueue('noop', payload),
      enqueueBatch: (payloads) => queue.enqueueMany(payloads.map((payload) => ({ type: 'noop', payload }))),
      close: () => pool.end(),
    };
  },
};
