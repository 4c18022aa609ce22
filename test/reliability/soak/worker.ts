/**
 * A worker process for the crash tests and the soak: runs the handlers of handler.ts until
 * SIGTERM (then drains and exits 0) or until something kills it.
 *
 *   node -r test/support/ts-register.js test/reliability/soak/worker.ts
 *
 * Environment:
 * - SOAK_DATABASE_URL, SOAK_WORKER_ID (required)
 * - SOAK_QUEUES (comma-separated, default `default`), SOAK_CONCURRENCY (default 10),
 *   SOAK_LEASE_MS (default 2000), SOAK_POLL_MS (default 100), SOAK_TICK_MS (default 250)
 * - WORKHORSE_FAILPOINTS, read by lib/core/failpoints.ts: where the process kills itself.
 *
 * Standard output, one line each: `READY <pid> <CPU µs so far>` once the worker runs, `LEASE_LOST <jobId>
 * <attempt>` for every `job.lease_lost` event (the worker gave the job up, or the database
 * refused one of its writes as stale), `STOPPED <user µs> <system µs>` (its CPU time) after a clean stop. Worker errors go to standard
 * error as `WORKER_ERROR <during>: <message>`. Linux pipes are written synchronously, so a line
 * printed before a SIGKILL is not lost with the process.
 */
import { Pool } from 'pg';
import { Queue, Worker } from '../../../lib/core';
import { registerSoakHandlers } from './handler';

function numberFromEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value)) throw new Error(`${name} must be an integer, got ${text}`);
  return value;
}

const url = process.env.SOAK_DATABASE_URL;
const workerId = process.env.SOAK_WORKER_ID;
if (!url || !workerId) {
  process.stderr.write('soak worker: set SOAK_DATABASE_URL and SOAK_WORKER_ID\n');
  process.exit(2);
}
const concurrency = numberFromEnv('SOAK_CONCURRENCY', 10);

const pool = new Pool({ connectionString: url, max: concurrency + 2 });
pool.on('error', () => undefined);
const worker = new Worker(new Queue(pool), {
  workerId,
  queues: (process.env.SOAK_QUEUES ?? 'default').split(','),
  concurrency,
  leaseMs: numberFromEnv('SOAK_LEASE_MS', 2000),
  pollMs: numberFromEnv('SOAK_POLL_MS', 100),
  tickMs: numberFromEnv('SOAK_TICK_MS', 250),
});
registerSoakHandlers(worker, pool);

worker.on((event) => {
  if (event.name === 'worker.started') {
    const cpu = process.cpuUsage();
    process.stdout.write(`READY ${process.pid} ${cpu.user + cpu.system}\n`);
  }
  else if (event.name === 'job.lease_lost') process.stdout.write(`LEASE_LOST ${event.jobId} ${event.attempt}\n`);
  else if (event.name === 'worker.error') process.stderr.write(`WORKER_ERROR ${event.during}: ${event.error.message}\n`);
});

process.once('SIGTERM', () => {
  void worker
    .stop()
    .then(() => pool.end())
    .then(() => {
      const cpu = process.cpuUsage();
      process.stdout.write(`STOPPED ${cpu.user} ${cpu.system}\n`);
      process.exit(0);
    });
});

worker.run().catch((error: unknown) => {
  process.stderr.write(`soak worker: ${String(error)}\n`);
  process.exit(1);
});
