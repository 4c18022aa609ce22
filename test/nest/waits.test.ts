/**
 * Signals and human decisions from Nest: a `@JobHandler` method waits through its
 * `HandlerContext`, and a `@Transactional()` service sends the signal and records the decision
 * with the injected `Queue` (listing with the injected `Admin`) inside its transaction, so a
 * rolled-back request delivers nothing.
 */
import { Injectable } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import {
  Admin,
  JobHandler,
  Queue,
  Transactional,
  WorkhorseModule,
  WorkhorseTransactionHost,
  type HandlerContext,
  type HumanWait,
} from 'nestjs-workhorse';
import { stateOf } from '../support/job-state';
import { waitFor } from '../support/wait';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

@Injectable()
class ShipmentHandlers {
  @JobHandler('shipment.track', { queue: 'nest-waits' })
  async track(_payload: { orderId: string }, ctx: HandlerContext): Promise<unknown> {
    const shipped = await ctx.waitForSignal<{ trackingId: string }>('shipped');
    const approval = await ctx.waitForHuman('release', { context: { trackingId: shipped.trackingId }, choices: ['yes', 'no'] });
    return { trackingId: shipped.trackingId, decision: approval.decision, actor: approval.actor };
  }
}

@Injectable()
class WarehouseService {
  constructor(
    private readonly tx: WorkhorseTransactionHost,
    private readonly queue: Queue,
    private readonly admin: Admin,
  ) {}

  /** Records the shipment and signals the job, in one transaction; `fail` rolls both back. */
  @Transactional()
  async shipped(jobId: string, trackingId: string, fail: boolean): Promise<string> {
    await this.tx.query('INSERT INTO shipments (job_id, tracking_id) VALUES ($1, $2)', [jobId, trackingId]);
    const status = await this.queue.sendSignal(jobId, 'shipped', { trackingId });
    if (fail) throw new Error('the request failed after the signal was sent');
    return status;
  }

  @Transactional()
  async release(jobId: string, actor: string): Promise<{ open: HumanWait[]; status: string }> {
    const open = (await this.admin.listHumanWaits({ jobId })).items;
    const status = await this.queue.completeHumanWait(jobId, 'release', 'yes', { actor });
    return { open, status };
  }
}

const { db } = useTestDatabase({ beforeDrop: () => moduleRef?.close() });
let moduleRef: TestingModule;

beforeAll(async () => {
  quietNestLogs();
  await db.pool.query('CREATE TABLE shipments (job_id uuid, tracking_id text)');
  moduleRef = await startModule({
    imports: [WorkhorseModule.forRoot({ connectionString: db.url, worker: { pollMs: 50, tickMs: 50 } })],
    providers: [ShipmentHandlers, WarehouseService],
  });
});

it('a @JobHandler waits for a signal and a decision that a @Transactional service sends with the injected Queue', async () => {
  const queue = moduleRef.get(Queue);
  const admin = moduleRef.get(Admin);
  const warehouse = moduleRef.get(WarehouseService);
  const jobId = await queue.enqueue('shipment.track', { orderId: 'o-1' });
  await waitFor(async () => (await stateOf(db.pool, jobId)) === 'blocked', 10_000, 'the job to wait for its signal');

  // A request that fails rolls its signal back with its own write: the job still waits.
  await expect(warehouse.shipped(jobId, 'T-0', true)).rejects.toThrow('the request failed');
  const { rows } = await db.pool.query('SELECT 1 FROM shipments');
  expect(rows).toHaveLength(0);
  expect(await stateOf(db.pool, jobId)).toBe('blocked');

  expect(await warehouse.shipped(jobId, 'T-1', false)).toBe('delivered');
  await waitFor(async () => (await admin.listHumanWaits({ jobId })).items.length === 1, 10_000, 'the human wait to open');
  const { open, status } = await warehouse.release(jobId, 'dock-manager');
  expect(open.map((w) => [w.name, w.context])).toEqual([['release', { trackingId: 'T-1' }]]);
  expect(status).toBe('completed');
  await waitFor(async () => (await stateOf(db.pool, jobId)) === 'succeeded', 10_000, 'the job to succeed');
  expect((await admin.getJob(jobId))?.result).toEqual({ trackingId: 'T-1', decision: 'yes', actor: 'dock-manager' });
});
