'use strict';
/**
 * nestjs-workhorse through its Nest module: an application context importing
 * `WorkhorseModule.forRoot({ connectionString, poolConfig: { max: 10 }, worker: { concurrency } })`
 * with one provider whose method carries `@JobHandler('noop')` and one whose method carries
 * `@OnWorkhorseEvent('worker.error')` (the errors the benchmark counts: as the core adapter's
 * `worker.on(['worker.error'], ...)`, it asks for no per-job event). The worker is the module's
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
    const { WorkhorseModule, JobHandler, OnWorkhorseEvent } = nestApi(libDir);

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

    // What `@Injectable() class ErrorCounter { @OnWorkhorseEvent('worker.error') onError(event) {} }` compiles to.
    class ErrorCounter {
      onError(event) {
        onError(`${event.during}: ${event.error && event.error.message}`);
      }
    }
    const counter = ErrorCounter.prototype;
    const subscribed = Reflect.decorate([OnWorkhorseEvent('worker.error')], counter, 'onError', Object.getOwnPropertyDescriptor(counter, 'onError'));
    Object.defineProperty(counter, 'onError', subscribed);
    Injectable()(ErrorCounter);

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
      providers: [NoopHandlers, ErrorCounter],
    })(BenchModule);

    const app = await NestFactory.createApplicationContext(BenchModule, { logger: false });
    return {
      async stop() {
        await app.close();
      },
    };
  },
};
