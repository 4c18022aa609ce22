/**
 * The test bed of the tests of jobs that park on a wait (test/core/signals.test.ts,
 * test/core/human-waits.test.ts): one database with the side-effects table, the in-process
 * workers each test starts (stopped after the test, then the split and attempt-history
 * invariants checked), and the wait-worker processes killed at the end.
 */
import type { Pool } from 'pg';
import { Admin, Queue, Worker, type WorkerEventOf } from '../../lib/core';
import { CREATE_SIDE_EFFECTS_SQL } from '../fixtures/side-effects';
import { useTestDatabase, type TestDatabaseBed } from './test-database';
import { waitFor } from './wait';
import { killWaitWorkers } from './wait-worker-process';

/** Its fields exist from the start (the database behind them inside the tests); its methods may be destructured. */
export class WaitTestBed {
  /** The test database's URL (for worker processes). */
  readonly url: string;
  readonly pool: Pool;
  readonly queue: Queue;
  readonly admin: Admin;
  /** The `job.blocked` events of the workers of the current test. */
  readonly blockedEvents: WorkerEventOf<'job.blocked'>[] = [];
  private readonly workers: Worker[] = [];
  private readonly runs: Promise<void>[] = [];

  constructor(
    private readonly concurrency: number,
    database: TestDatabaseBed,
  ) {
    ({ url: this.url, pool: this.pool, queue: this.queue, admin: this.admin } = database);
  }

  /** Starts a worker on `queueName` (stopped after the test), with handlers from `register`. */
  readonly startWorker = (queueName: string, register: (worker: Worker) => void, workerId = `w-${queueName}`): Worker => {
    const worker = new Worker(this.queue, { queues: [queueName], concurrency: this.concurrency, leaseMs: 10_000, pollMs: 50, tickMs: 100, workerId });
    register(worker);
    worker.on(['job.blocked'], (event) => this.blockedEvents.push(event));
    this.workers.push(worker);
    this.runs.push(worker.run());
    return worker;
  };

  readonly waitForState = async (jobId: string, state: string, timeoutMs = 15_000): Promise<void> => {
    await waitFor(async () => (await this.admin.getJob(jobId))?.state === state, timeoutMs, `job ${jobId} to be ${state}`);
  };

  /** Stops the workers of the test that ended, so later tests' counts see no writes of theirs. */
  async afterTest(): Promise<void> {
    await Promise.all(this.workers.splice(0).map((w) => w.stop()));
    await Promise.all(this.runs.splice(0));
    this.blockedEvents.length = 0;
  }

  /** Kills the wait-worker processes and stops whatever worker a failed test left running. */
  async tearDown(): Promise<void> {
    await killWaitWorkers();
    await Promise.all(this.workers.map((w) => w.stop().catch(() => undefined)));
    await Promise.all(this.runs.map((r) => r.catch(() => undefined)));
  }
}

/**
 * A test bed whose set-up and tear-down are hooks of the calling test file: a database test bed
 * (test/support/test-database) with the side-effects table, whose invariant check after each
 * test follows the stop of that test's workers.
 */
export function useWaitTestBed(options: { concurrency: number }): WaitTestBed {
  const bed: WaitTestBed = new WaitTestBed(
    options.concurrency,
    useTestDatabase({ afterEachTest: () => bed.afterTest(), beforeDrop: () => bed.tearDown() }),
  );
  beforeAll(async () => {
    await bed.pool.query(CREATE_SIDE_EFFECTS_SQL);
  });
  return bed;
}
