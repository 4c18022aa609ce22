'use strict';
/**
 * nestjs-workhorse through its Nest module: an application context importing
 * `WorkhorseModule.forRoot({ connectionString, poolConfig: { max: 10 }, worker: { concurrency } })`
 * with one provider whose method carries `@JobHandler('noop')`. The worker is the module's
 * lifecycle-managed `WorkhorseWorker`; the application is closed to stop it. Producing, schema
 * installation and preloading are the core client's (the Nest `Queue` wraps the same call).
 */
const path = require('node:path');
const core = require('./workhorse');

const POOL_MAX = 10;

function nestApi(libDir) {
  require('reflect-metadata');
  const nest = require(path.join(libDir, 'lib', 'nest', 'index.js'));
  if (typeof nest.WorkhorseModule !== 'function' || typeof nest.JobHandler !== 'function') {
    throw new Error('lib/nest/index.ts does not export WorkhorseModule and JobHandler');
  }
  return nest;
}

/** True when the Nest module can be loaded from the transpiled sources. */
function available(libDir) {
  try {
    nestApi(libDir);
    return { ok: true };
  } catch (error) {
    return { ok: false, reason: error.message };
  }
}

module.exports = {
  ...core,
  available,

  async startWorker({ libDir, url, concurrency, onJob, onError, options = {} }) {
    const { Module, Injectable } = require('@nestjs/common');
    const { NestFactory } = require('@nestjs/core');
    const { WorkhorseModule, JobHandler, WorkhorseWorker } = nestApi(libDir);

    // What `@Injectable() class NoopHandlers { @JobHandler('noop') noop(payload) {} }` compiles to.
    class NoopHandlers {
      async noop(payload) {
        onJob(payload);
      }
    }
    const proto = NoopHandlers.prototype;
    const decorated = Reflect.decorate([JobHandler('noop')], proto, 'noop', Object.getOwnPropertyDescriptor(proto, 'noop'));
    Object.defineProperty(proto, 'noop', decorated);
    Injectable()(NoopHandlers);

    class BenchModule {}
    Module({
      imports: [
        WorkhorseModule.forRoot({
          connectionString: url,
          poolConfig: { max: POOL_MAX },
          schema: 'verify',
          worker: { concurrency, ...options },
        }),
      ],
      providers: [NoopHandlers],
    })(BenchModule);

    const app = await NestFactory.createApplicationContext(BenchModule, { logger: false });
    const worker = app.get(WorkhorseWorker);
    const subscription = worker.events$.subscribe((event) => {
      if (event.name === 'worker.error') onError(`${event.during}: ${event.error && event.error.message}`);
    });
    return {
      async stop() {
        subscription.unsubscribe();
        await app.close();
      },
    };
  },
};
