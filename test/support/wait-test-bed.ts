/**
 * The test bed of the tests of jobs that park on a wait (test/core/signals.test.ts,
 * test/core/human-waits.test.ts): one database with the side-effects table, the in-process
 * workers each test starts (stopped after the test, then the split and attempt-history
 * invariants checked), and the wait-worker processes killed at the end.
 */
import type { Pool } from 'pg';
import { Admin, Queue, Worker, type WorkerEventOf } from '../../lib/core';
import { CREATE_SIDE_EFFECTS_SQL } from '../fixtures/side-effects';
import { createTestDatabase, type TestDatabase } from './db';
import { attemptHistoryViolations, expectSplitInvariant } from './invariants';
import { waitFor } from './wait';
import { killWaitWorkers } from './wait-worker-process';

/** Its fields are set from `beforeAll` on; its methods may be destructured. */
export class WaitTestBed {
  /** The test database's URL (for worker processes). */
  url!: string;
  pool!: Pool;
  queue!: Queue;
  admin!: Admin;
  /** The `job.blocked` events of the workers of the current test. */
  readonly blockedEvents: WorkerEventOf<'job.blocked'>[] = [];
  private db: TestDatabase | undefined;
  private readonly workers: Worker[] = [];
  private readonly runs: Promise<void>[] = [];

  constructor(private readonly concurrency: number) {}

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

  async setUp(): Promise<void> {
    this.db = await createTestDatabase();
    this.url = this.db.url;
    this.pool = this.db.pool;
    this.queue = new Queue(this.pool);
    this.admin = new Admin(this.pool);
    await this.pool.query(CREATE_SIDE_EFFECTS_SQL);
  }

  async afterTest(): Promise<void> {
    // Each test's workers stop with it, so later tests' counts see no writes of theirs.
    await Promise.all(this.workers.splice(0).map((w) => w.stop()));
    await Promise.all(this.runs.splice(0));
    this.blockedEvents.length = 0;
    await expectSplitInvariant(this.pool);
    expect(await attemptHistoryViolations(this.pool)).toEqual([]);
  }

  async tearDown(): Promise<void> {
    await killWaitWorkers();
    await Promise.all(this.workers.map((w) => w.stop().catch(() => undefined)));
    await Promise.all(this.runs.map((r) => r.catch(() => undefined)));
    await this.db?.drop();
  }
}

/** A test bed whose set-up and tear-down are hooks of the calling test file. */
export function useWaitTestBed(options: { concurrency: number }): WaitTestBed {
  const bed = new WaitTestBed(options.concurrency);
  beforeAll(() => bed.setUp());
  afterEach(() => bed.afterTest());
  afterAll(() => bed.tearDown());
  return bed;
}
