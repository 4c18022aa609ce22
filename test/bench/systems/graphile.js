'use strict';
/**
 * graphile-worker through its documented JavaScript API: `run({ taskList, concurrency })`,
 * `makeWorkerUtils().addJob` / `.addJobs`. With `batching: true` the worker also gets the
 * settings of graphile-worker's performance page (worker.graphile.org/docs/performance):
 * `localQueue: { size: 500 }`, `completeJobBatchDelay: 0`, `failJobBatchDelay: 0`.
 */
const POOL_MAX = 10;

const BATCHING_PRESET = {
  worker: {
    localQueue: { size: 500 },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
  },
};

function gw() {
  return require('graphile-worker');
}

function quietLogger(onError) {
  const { Logger } = gw();
  return new Logger(() => (level, message) => {
    if (level === 'error' && onError) onError(message);
  });
}

module.exports = {
  schema: 'graphile_worker',
  BATCHING_PRESET,
  version() {
    return require('graphile-worker/package.json').version;
  },

  async install({ url }) {
    await gw().runMigrations({ connectionString: url, logger: quietLogger() });
  },

  async preload({ url, count, parallel = 1 }) {
    const utils = await gw().makeWorkerUtils({ connectionString: url, maxPoolSize: Math.max(2, parallel), logger: quietLogger() });
    try {
      let next = 0;
      const lane = async () => {
        while (next < count) {
          const from = next;
          next = Math.min(count, next + 1000);
          const batch = [];
          for (let i = from; i < next; i++) batch.push({ identifier: 'noop', payload: { i } });
          await utils.addJobs(batch);
        }
      };
      await Promise.all(Array.from({ length: parallel }, lane));
    } finally {
      await utils.release();
    }
  },

  pendingSql: 'SELECT count(*)::int AS n FROM graphile_worker._private_jobs',

  async startWorker({ url, concurrency, onJob, onError, options = {} }) {
    const runner = await gw().run({
      connectionString: url,
      concurrency,
      maxPoolSize: POOL_MAX,
      noHandleSignals: true,
      logger: quietLogger(onError),
      taskList: {
        noop: async (payload) => {
          onJob(payload);
        },
      },
      ...(options.batching ? { preset: BATCHING_PRESET } : {}),
    });
    return {
      async stop() {
        await runner.stop();
        await runner.promise.catch(() => undefined);
      },
    };
  },

  async producer({ url, poolMax }) {
    const utils = await gw().makeWorkerUtils({ connectionString: url, maxPoolSize: poolMax, logger: quietLogger() });
    return {
      enqueue: (payload) => utils.addJob('noop', payload),
      enqueueBatch: (payloads) => utils.addJobs(payloads.map((payload) => ({ identifier: 'noop', payload }))),
      close: () => utils.release(),
    };
  },
};
