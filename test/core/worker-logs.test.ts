/**
 * The core worker's injectable logger: problems and lifecycle at their documented levels, every
 * line about a job naming its id, type and attempt, claims and successes never; a logger without
 * the methods is refused by name.
 */
import { Admin, NonRetryableError, Queue, Worker, WorkhorseValidationError, type WorkhorseLogger } from '../../lib/core';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { pool } = useTestDatabase({ checkInvariants: false });

it('logs job problems with id, type and attempt at warn, the lifecycle at log, and never claims or successes', async () => {
  const lines: [keyof WorkhorseLogger, string][] = [];
  const logger: WorkhorseLogger = {
    log: (m) => lines.push(['log', m]),
    warn: (m) => lines.push(['warn', m]),
    error: (m) => lines.push(['error', m]),
  };
  const queue = new Queue(pool);
  const [ok, flaky, doomed] = await queue.enqueueMany([
    { type: 'ok', payload: {}, queue: 'logs' },
    { type: 'flaky', payload: {}, queue: 'logs', maxAttempts: 2, retryPolicy: { kind: 'fixed', delayMs: 0 } },
    { type: 'doomed', payload: {}, queue: 'logs' },
  ]);
  const worker = new Worker(queue, { queues: ['logs'], pollMs: 20, tickMs: 50, logger })
    .handle('ok', () => 'fine')
    .handle('flaky', (_p, ctx) => {
      if (ctx.attempt === 1) throw new Error('first time');
    })
    .handle('doomed', () => {
      throw new NonRetryableError('never');
    });
  const done = worker.run();
  const admin = new Admin(pool);
  await waitFor(async () => {
    const states = await Promise.all([ok, flaky, doomed].map(async (id) => (await admin.getJob(id))?.state));
    return states.every((s) => s === 'succeeded' || s === 'failed');
  }, 20_000, 'every job to end');
  await worker.stop();
  await done;

  expect(lines[0]).toEqual(['log', `Worker ${worker.workerId} started on queue(s) logs with concurrency 10.`]);
  expect(lines).toContainEqual(['warn', expect.stringMatching(new RegExp(`^Job ${flaky} \\(flaky\\) attempt 1 failed with Error: first time; next attempt at `))]);
  expect(lines).toContainEqual(['warn', `Job ${doomed} (doomed) attempt 1 failed for good: NonRetryableError: never.`]);
  expect(lines.at(-1)).toEqual(['log', `Worker ${worker.workerId} stopped.`]);
  expect(lines.filter(([, m]) => m.includes(ok))).toEqual([]);
  expect(lines).toHaveLength(4);
});

it('refuses a logger without log, warn and error', () => {
  const error = (() => {
    try {
      new Worker(new Queue(pool), { logger: { log: () => undefined } as unknown as WorkhorseLogger });
    } catch (e) {
      return e;
    }
  })();
  expect(error).toBeInstanceOf(WorkhorseValidationError);
  expect((error as WorkhorseValidationError).field).toBe('logger');
});
