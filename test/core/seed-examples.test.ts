/**
 * The TypeScript examples of the seed documents run against lib/core with only the import path
 * changed. Each example lives verbatim in a fixture under test/fixtures/seed-examples/, wrapped
 * by what it needs to run (an async function, since CommonJS has no top-level await); the names
 * it takes from its surroundings come from prelude.ts. Importing the fixtures here makes ts-jest
 * type-check them, so an example that no longer compiles fails this file.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Queue, Worker, type JobSnapshot, type Pool, type WorkerEvent } from '../../lib/core';
import { printJob } from '../fixtures/seed-examples/admin-get-job';
import { registerInvoiceHandler } from '../fixtures/seed-examples/invoice-handler';
import { calls, define, faults } from '../fixtures/seed-examples/prelude';
import { transactionalEnqueue } from '../fixtures/seed-examples/transactional-enqueue';
import { runWorker } from '../fixtures/seed-examples/worker-run';
import { itIf, type Requirement } from '../support/requirements';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const FIXTURES = resolve(__dirname, '../fixtures/seed-examples');
// The product documents the examples come from; present in the development workspace only.
const SEEDS = resolve(__dirname, '../../../shared/seeds');
const SEEDS_PRESENT: Requirement = {
  met: existsSync(SEEDS),
  missing: `the product documents are not beside the repository (${SEEDS}); they exist in the development workspace only`,
};
const LIB_IMPORT = '"../../../lib/core"';

interface SeedBlock {
  fixture: string;
  source: string;
  code: string;
}

/** The ```ts blocks of SEED-EXAMPLES.md, each with the fixture that runs it. */
function seedBlocks(): SeedBlock[] {
  const text = readFileSync(join(FIXTURES, 'SEED-EXAMPLES.md'), 'utf8');
  const pattern = /<!-- fixture: (\S+); source: (\S+)[^\n]*-->\n```ts\n([\s\S]*?)```/g;
  return [...text.matchAll(pattern)].map((m) => ({ fixture: m[1], source: m[2], code: m[3] }));
}

describe('seed document examples', () => {
  const ORDER_ID = 'order-1001';
  const savedDatabaseUrl = process.env.DATABASE_URL;
  // What the examples create themselves, kept so the tear-down can close it.
  let examplePool: Pool | undefined;
  const { db, admin } = useTestDatabase({
    beforeDrop: async () => {
      await Promise.all(workers.map((w) => w.stop()));
      await examplePool?.end();
    },
  });
  const workers: Worker[] = [];
  let orderJobId = '';

  beforeAll(async () => {
    await db.pool.query('CREATE TABLE public.orders (id text PRIMARY KEY)');
    define({ databaseUrl: db.url, orderId: ORDER_ID });
  });

  afterAll(() => {
    if (savedDatabaseUrl === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = savedDatabaseUrl;
  });

  describe('fixtures', () => {
    const blocks = seedBlocks();

    it('hold all four seed examples', () => {
      expect(blocks.map((b) => b.fixture)).toEqual([
        'transactional-enqueue.ts',
        'worker-run.ts',
        'admin-get-job.ts',
        'invoice-handler.ts',
      ]);
    });

    it.each(blocks.map((b) => [b.fixture, b] as const))('%s contains its example verbatim', (_name, block) => {
      const fixture = readFileSync(join(FIXTURES, block.fixture), 'utf8');
      const lines = block.code.replace(/\n+$/, '').split('\n');
      const imports = lines.filter((line) => line.startsWith('import '));
      const body = lines
        .filter((line) => !line.startsWith('import '))
        .join('\n')
        .replace(/^\n+/, '');
      for (const line of imports) {
        expect(line).toContain('"@stablemates/workhorse"');
        expect(fixture.split('\n')).toContain(line.replace('"@stablemates/workhorse"', LIB_IMPORT));
      }
      const verbatim = /\/\/ ---- verbatim from the seed below ----\n([\s\S]*?)\n\/\/ ---- end of verbatim ----/.exec(fixture);
      expect(verbatim?.[1]).toBe(body);
    });

    itIf(SEEDS_PRESENT, 'match the seed documents', () => {
      for (const block of blocks) {
        const seed = readFileSync(join(SEEDS, block.source), 'utf8');
        expect(seed).toContain('```ts\n' + block.code + '```');
      }
    });
  });

  describe('run for real', () => {
    it('the transactional enqueue example commits a job together with an orders row', async () => {
      const { pool, queue } = await transactionalEnqueue();
      examplePool = pool;

      // Seen from another connection, so both writes were committed.
      const orders = await db.pool.query('SELECT id FROM public.orders');
      expect(orders.rows).toEqual([{ id: ORDER_ID }]);
      const jobs = await db.pool.query<{ id: string }>("SELECT id FROM workhorse.job WHERE type = 'order.fulfill'");
      expect(jobs.rows).toHaveLength(1);
      orderJobId = jobs.rows[0].id;
      expect(await admin.getJob(orderJobId)).toMatchObject({
        state: 'ready',
        queue: 'default',
        payload: { orderId: ORDER_ID },
        currentAttempt: 0,
      });
      define({ jobId: orderJobId, pool, queue });
    });

    it('the Worker example runs that job with its checkpoints, and a retry replays "charge"', async () => {
      expect(orderJobId).not.toBe('');
      // The example's own comment: if the process dies after "charge", the retry skips it.
      // Failing the first "label" call makes the first attempt end right there.
      faults.failNextLabel = true;

      // The example keeps its worker to itself; the spy hands the test the instance to stop.
      const runSpy = jest.spyOn(Worker.prototype, 'run');
      let worker: Worker | undefined;
      let running: Promise<void> | undefined;
      const events: WorkerEvent[] = [];
      try {
        running = runWorker();
        expect(runSpy).toHaveBeenCalledTimes(1);
        worker = runSpy.mock.contexts[0] as Worker;
        workers.push(worker);
        worker.on((event) => events.push(event));

        const done = await waitFor(async () => {
          const job = await admin.getJob(orderJobId);
          return job && ['succeeded', 'failed', 'canceled'].includes(job.state) ? job : null;
        }, 30_000, `order job ${orderJobId} to end`);
        expect(done).toMatchObject<Partial<JobSnapshot>>({
          state: 'succeeded',
          currentAttempt: 2,
          result: { chargeId: `ch_${ORDER_ID}`, labelId: `lb_${ORDER_ID}` },
        });
        await worker.stop();
        await running;
      } finally {
        runSpy.mockRestore();
        await worker?.stop();
      }

      expect(calls.chargeCard).toEqual([ORDER_ID]);
      expect(calls.printLabel).toEqual([ORDER_ID, ORDER_ID]);
      const checkpoints = await db.pool.query(
        'SELECT name, value, attempt FROM workhorse.job_checkpoint WHERE job_id = $1 ORDER BY name',
        [orderJobId],
      );
      expect(checkpoints.rows).toEqual([
        { name: 'charge', value: { chargeId: `ch_${ORDER_ID}` }, attempt: 1 },
        { name: 'label', value: { labelId: `lb_${ORDER_ID}` }, attempt: 2 },
      ]);
      const attempts = await db.pool.query(
        'SELECT attempt, outcome, error ->> $2 AS message FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
        [orderJobId, 'message'],
      );
      expect(attempts.rows).toEqual([
        { attempt: 1, outcome: 'failed', message: 'label printer offline' },
        { attempt: 2, outcome: 'succeeded', message: null },
      ]);
      const names = events.map((e) => e.name);
      expect(names).toEqual(expect.arrayContaining(['job.retry_scheduled', 'job.succeeded', 'worker.stopped']));
    });

    it('the Admin.getJob example prints state, currentAttempt and result', async () => {
      const log = jest.spyOn(console, 'log').mockImplementation(() => undefined);
      try {
        await printJob();
        expect(log).toHaveBeenCalledTimes(1);
        expect(log).toHaveBeenCalledWith('succeeded', 2, { chargeId: `ch_${ORDER_ID}`, labelId: `lb_${ORDER_ID}` });
      } finally {
        log.mockRestore();
      }
    });

    it('the invoice.send handler example runs and stores its send as a checkpoint', async () => {
      const queue = new Queue(db.pool);
      const worker = new Worker(queue, { listen: false, workerId: 'seed-invoice-worker' });
      workers.push(worker);
      define({ worker });
      registerInvoiceHandler();
      expect(worker.types).toEqual(['invoice.send']);

      const id = await queue.enqueue('invoice.send', { invoiceId: 'inv-42' });
      expect(await worker.runOnce()).toBe(1);

      const expected = { messageId: 'msg_1', idempotencyKey: 'invoice:inv-42' };
      expect(await admin.getJob(id)).toMatchObject({ state: 'succeeded', currentAttempt: 1, result: expected });
      expect(calls.emailSend).toEqual([{ idempotencyKey: 'invoice:inv-42' }]);
      const checkpoint = await db.pool.query('SELECT name, value FROM workhorse.job_checkpoint WHERE job_id = $1', [id]);
      expect(checkpoint.rows).toEqual([{ name: 'send', value: expected }]);
    });
  });
});
