/**
 * What a Nest app must do when its injected Queue and Admin join an ORM's transaction (through
 * the module's `transaction` option): the app's OrdersPlacer writes an order with the ORM and
 * enqueues with the injected Queue in one transaction; the order and the job commit together,
 * roll back together, and Admin sees the uncommitted job inside; outside any transaction the
 * Queue uses the pool.
 */
import type { TestingModule } from '@nestjs/testing';
import { Queue, type JobSnapshot } from 'nestjs-workhorse';
import type { TestDatabase } from '../support/db';
import { quietNestLogs } from '../nest/support';
import { stateOf } from '../support/job-state';
import { ORDERS_TABLE_SQL } from './orm-conformance';
import { useTestDatabase } from '../support/test-database';

export interface Placed {
  jobId: string;
  /** What the injected Admin saw inside the transaction, before the commit. */
  seen: JobSnapshot | null;
}

/** The business service of each app. */
export interface OrdersPlacer {
  /** Writes order `id` with the ORM and enqueues its job, in one transaction; throws at the end when `fail`. */
  place(id: string, fail?: boolean): Promise<Placed>;
  /** What the last `place` did inside its transaction, also when it then threw. */
  readonly last: Placed | undefined;
}

/** An app under test: its name, how to start it on a database, and its OrdersPlacer's class. */
export type NestOrmApp = [name: string, start: (url: string) => Promise<TestingModule>, placer: abstract new (...args: never[]) => OrdersPlacer];

export interface RunningApp {
  app: TestingModule;
  db: TestDatabase;
}

async function orderExists(db: TestDatabase, id: string): Promise<boolean> {
  return (await db.pool.query('SELECT 1 FROM orders WHERE id = $1', [id])).rows.length === 1;
}

/** Declares the tests for each app; `more` adds tests of its own, given the running app. */
export function describeNestAppsJoin(title: string, apps: NestOrmApp[], more?: (running: () => RunningApp) => void): void {
  describe.each(apps)(title, (_name, start, placer) => {
    const { db } = useTestDatabase({ checkInvariants: false, beforeDrop: () => app?.close() });
    let app: TestingModule;
    let orders: OrdersPlacer;

    beforeAll(async () => {
      quietNestLogs();
      await db.pool.query(ORDERS_TABLE_SQL);
      app = await start(db.url);
      orders = app.get(placer);
    });

    it('commits the order and its job together, and Admin saw the job inside the transaction', async () => {
      const { jobId, seen } = await orders.place('o-1');
      expect(seen).toMatchObject({ id: jobId, state: 'ready', payload: { orderId: 'o-1' } });
      expect(await orderExists(db, 'o-1')).toBe(true);
      expect(await stateOf(db.pool, jobId)).toBe('ready');
    });

    it('rolls back the order and its job together when the transaction throws', async () => {
      await expect(orders.place('o-2', true)).rejects.toThrow('payment refused');
      const inside = orders.last;
      expect(inside?.seen).toMatchObject({ state: 'ready', payload: { orderId: 'o-2' } });
      expect(await stateOf(db.pool, inside?.jobId ?? '')).toBeNull();
      expect(await orderExists(db, 'o-2')).toBe(false);
    });

    it('uses the pool outside a transaction', async () => {
      const jobId = await app.get(Queue).enqueue('order.fulfill', { orderId: 'o-3' });
      expect(await stateOf(db.pool, jobId)).toBe('ready');
    });

    more?.(() => ({ app, db }));
  });
}
