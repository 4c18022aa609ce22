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

  /**
   * Preloads `count` no-op jobs (payload {i}) with the batch API, `parallel` batches at a time.
   * `shape` (the orchestration group): `fanout` is one parent that starts `count - 1` no-op
   * children with ctx.runChildren; `fanin` is `count - 1` no-op jobs and one that depends on all.
   */
  async preload({ libDir, url, count, parallel = 1, shape }) {
    const pool = makePool(libDir, url, parallel);
    const queue = new (core(libDir).Queue)(pool);
    try {
      if (shape === 'fanout') {
        await queue.enqueue('fanout.parent', { children: count - 1 });
        return;
      }
      if (shape === 'fanin') {
        const ids = [];
        for (let from = 0; from < count - 1; from += 1000) {
          const batch = [];
          for (let i = from; i < Math.min(count - 1, from + 1000); i++) batch.push({ type: 'noop', payload: { i } });
          ids.push(...(await queue.enqueueMany(batch)));
        }
        await queue.enqueue('fanin.sink', null, { dependsOn: ids });
        return;
      }
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
    // The orchestration group's shapes (see preload): each job counts once, a parent when it ends.
    worker.handle('fanout.parent', async (payload, ctx) => {
      const children = Array.from({ length: payload.children }, (_, i) => ({ type: 'noop', payload: { i } }));
      for (let from = 0, call = 0; from < children.length; from += 1000, call++) {
        await ctx.runChildren(`children-${call}`, children.slice(from, from + 1000));
      }
      onJob(payload);
    });
    worker.handle('fanin.sink', async (payload) => {
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
