/**
 * `@JobHandler(type, { transactional: true })`: the handler runs inside the transaction that
 * records the job's completion, and the host, `Queue` and `Admin` join it. Its writes commit
 * with the completion, and a failure rolls them back while the job is retried.
 */
import { Injectable } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import {
  Admin,
  JobHandler,
  Queue,
  WorkhorseModule,
  WorkhorseTransactionHost,
  type HandlerContext,
} from 'nestjs-workhorse';
import { waitForJobState } from 'nestjs-workhorse/testing';
import { stateOf } from '../support/job-state';
import { gate, waitFor, type Gate } from '../support/wait';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

interface PostPayload {
  entry: string;
  failFirst?: boolean;
  hold?: boolean;
}

const held = new Map<string, Gate>();
const reached = new Set<string>();

@Injectable()
class LedgerHandlers {
  constructor(
    private readonly tx: WorkhorseTransactionHost,
    private readonly queue: Queue,
    private readonly admin: Admin,
  ) {}

  @JobHandler('ledger.post', { transactional: true })
  async post(payload: PostPayload, ctx: HandlerContext): Promise<{ followUpVisible: boolean; sameTransaction: boolean }> {
    await this.tx.query('INSERT INTO ledger (entry, attempt) VALUES ($1, $2)', [payload.entry, ctx.attempt]);
    const followUp = await this.queue.enqueue('ledger.notify', { entry: payload.entry });
    const followUpVisible = (await this.admin.getJob(followUp))?.state === 'ready';
    const viaHost = (await this.tx.query<{ id: string }>('SELECT txid_current()::text AS id')).rows[0].id;
    const viaCtx = (await ctx.client?.query<{ id: string }>('SELECT txid_current()::text AS id'))?.rows[0].id;
    if (payload.hold) {
      reached.add(payload.entry);
      await held.get(payload.entry)?.promise;
    }
    if (payload.failFirst && ctx.attempt === 1) throw new Error(`attempt 1 of ${payload.entry} fails after writing`);
    return { followUpVisible, sameTransaction: viaHost === viaCtx };
  }
}

const { db } = useTestDatabase({ beforeDrop: () => moduleRef?.close() });
let moduleRef: TestingModule;
let queue: Queue;

async function ledgerRows(entry: string): Promise<{ attempt: number }[]> {
  const { rows } = await db.pool.query<{ attempt: number }>('SELECT attempt FROM ledger WHERE entry = $1 ORDER BY attempt', [entry]);
  return rows;
}

async function followUps(entry: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM workhorse.job WHERE type = 'ledger.notify' AND payload->>'entry' = $1",
    [entry],
  );
  return rows[0].n;
}

beforeAll(async () => {
  quietNestLogs();
  await db.pool.query('CREATE TABLE ledger (entry text NOT NULL, attempt int NOT NULL)');
  moduleRef = await startModule({
    // The follow-up type has no handler here: its jobs are released and stay for later.
    imports: [WorkhorseModule.forRoot({ connectionString: db.url, worker: { pollMs: 50, tickMs: 50, unknownTypeDelayMs: 60_000 } })],
    providers: [LedgerHandlers],
  });
  queue = moduleRef.get(Queue);
});

it("commits the handler's writes together with the job's completion", async () => {
  held.set('held', gate());
  const jobId = await queue.enqueue('ledger.post', { entry: 'held', hold: true });
  await waitFor(() => reached.has('held'), 10_000, 'the handler to have written and to wait');

  // Written but not committed: neither the row, nor the follow-up job, nor the completion shows.
  expect(await ledgerRows('held')).toEqual([]);
  expect(await followUps('held')).toBe(0);
  expect(await stateOf(db.pool, jobId)).toBe('active');

  held.get('held')?.open();
  const job = await waitForJobState(moduleRef, jobId, 'succeeded');
  expect(job.result).toEqual({ followUpVisible: true, sameTransaction: true });
  expect(await ledgerRows('held')).toEqual([{ attempt: 1 }]);
  expect(await followUps('held')).toBe(1);
});

it('rolls back the writes of a failed attempt and retries the job, which then succeeds', async () => {
  const jobId = await queue.enqueue(
    'ledger.post',
    { entry: 'flaky', failFirst: true },
    { maxAttempts: 3, retryPolicy: { kind: 'fixed', delayMs: 0 } },
  );
  const job = await waitForJobState(moduleRef, jobId, 'succeeded');
  expect(job.currentAttempt).toBe(2);
  // Only the second attempt's writes exist: the first attempt's row and follow-up job rolled back.
  expect(await ledgerRows('flaky')).toEqual([{ attempt: 2 }]);
  expect(await followUps('flaky')).toBe(1);
  const timeline = await moduleRef.get(Admin).getJobTimeline(jobId);
  const failedAttempt = timeline.items.find((entry) => entry.source === 'attempt' && entry.kind === 'failed');
  expect(failedAttempt?.data).toMatchObject({ error: { message: 'attempt 1 of flaky fails after writing' } });
});
