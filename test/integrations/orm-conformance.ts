/**
 * What every ORM entry point must do, run against the real ORM on a fresh database: a business
 * row written with the ORM and a job enqueued through the adapter commit together and roll back
 * together; `Admin` through the adapter answers exactly what it answers on the pool (so rows
 * come back typed as node-postgres types them); errors raised by the SQL functions arrive as
 * this package's typed errors; the adapter over the ORM's plain connection runs on its own; and
 * the ORM's TransactionScope makes its transaction current.
 */
import { IdempotencyConflictError, WorkhorseValidationError, type Queryable } from 'nestjs-workhorse/core';
import type { TransactionScope } from '../../lib/core/transaction-scope';
import type { TestDatabase } from '../support/db';
import { useTestDatabase } from '../support/test-database';

/** The business table every ORM test maps: `orders (id text primary key, amount_cents int)`. */
export const ORDERS_TABLE_SQL = 'CREATE TABLE orders (id text PRIMARY KEY, amount_cents integer NOT NULL)';

/** One ORM set up on a test database. */
export interface OrmUnderTest<Tx> {
  /** Runs `fn` in a transaction opened by the ORM itself, which commits unless `fn` throws. */
  transaction<R>(fn: (tx: Tx) => Promise<R>): Promise<R>;
  /** Writes an order row with the ORM inside `tx`. */
  insertOrder(tx: Tx, id: string): Promise<void>;
  /** The adapter over the ORM's transaction. */
  adapt(tx: Tx): Queryable;
  /** The adapter over the ORM's connection outside any transaction. */
  plain: Queryable;
  scope: TransactionScope<Tx>;
  close(): Promise<void>;
}

class Rollback extends Error {}

async function orderExists(db: TestDatabase, id: string): Promise<boolean> {
  const { rows } = await db.pool.query('SELECT 1 FROM orders WHERE id = $1', [id]);
  return rows.length === 1;
}

async function jobExists(db: TestDatabase, id: string): Promise<boolean> {
  const { rows } = await db.pool.query('SELECT 1 FROM workhorse.job WHERE id = $1', [id]);
  return rows.length === 1;
}

/** Declares the conformance tests of one ORM; `setUp` builds the ORM on the given database. */
export function describeOrmConformance<Tx>(name: string, setUp: (db: TestDatabase) => Promise<OrmUnderTest<Tx>>): void {
  describe(`${name}: the ORM's transaction and the job are one`, () => {
    const { db, queue, admin } = useTestDatabase({ beforeDrop: () => orm?.close() });
    let orm: OrmUnderTest<Tx>;

    beforeAll(async () => {
      await db.pool.query(ORDERS_TABLE_SQL);
      orm = await setUp(db);
    });

    it('commits the business row and the job together', async () => {
      const jobId = await orm.transaction(async (tx) => {
        await orm.insertOrder(tx, 'o-commit');
        const id = await queue.enqueue('order.fulfill', { orderId: 'o-commit' }, { tags: ['orm'] }, orm.adapt(tx));
        // Not visible outside the transaction before it commits.
        expect(await jobExists(db, id)).toBe(false);
        return id;
      });
      expect(await orderExists(db, 'o-commit')).toBe(true);
      expect(await admin.getJob(jobId)).toMatchObject({ type: 'order.fulfill', payload: { orderId: 'o-commit' }, state: 'ready' });
    });

    it("rolls back the business row and the job together when the ORM's transaction throws", async () => {
      let jobId = '';
      await expect(
        orm.transaction(async (tx) => {
          await orm.insertOrder(tx, 'o-rollback');
          jobId = await queue.enqueue('order.fulfill', { orderId: 'o-rollback' }, {}, orm.adapt(tx));
          const many = await queue.enqueueMany([{ type: 'order.audit', payload: { orderId: 'o-rollback' } }], orm.adapt(tx));
          expect(many).toHaveLength(1);
          throw new Rollback('changed my mind');
        }),
      ).rejects.toBeInstanceOf(Rollback);
      expect(jobId).not.toBe('');
      expect(await orderExists(db, 'o-rollback')).toBe(false);
      expect(await jobExists(db, jobId)).toBe(false);
      expect(await admin.getJob(jobId)).toBeNull();
    });

    it('answers Admin calls inside the transaction exactly as on the pool, uncommitted jobs included', async () => {
      const at = new Date(Date.now() + 3_600_000);
      const { jobId, inside } = await orm.transaction(async (tx) => {
        const client = orm.adapt(tx);
        const id = await queue.enqueue('order.report', { orderId: 'o-admin', big: 2 ** 40 }, { runAt: at, priority: 7 }, client);
        return {
          jobId: id,
          inside: {
            job: await admin.getJob(id, client),
            list: await admin.listJobs({ type: 'order.report', states: ['scheduled'] }, client),
            timeline: await admin.getJobTimeline(id, {}, client),
            paused: await admin.pauseQueue('reports', { actor: 'orm-test', reason: 'checking' }, client),
            queues: await admin.listQueues(client),
          },
        };
      });
      expect(inside.job).toEqual(await admin.getJob(jobId));
      expect(inside.job?.runAt).toEqual(at);
      expect(inside.job?.createdAt).toBeInstanceOf(Date);
      expect(inside.list).toEqual(await admin.listJobs({ type: 'order.report', states: ['scheduled'] }));
      expect(inside.timeline).toEqual(await admin.getJobTimeline(jobId));
      expect(inside.timeline.items[0]).toMatchObject({ kind: 'enqueued' });
      expect(typeof inside.timeline.items[0].id).toBe('string');
      expect(inside.paused).toMatchObject({ queue: 'reports', paused: true, changedBy: 'orm-test', reason: 'checking' });
      expect(inside.paused.changedAt).toBeInstanceOf(Date);
      expect(inside.queues).toEqual(await admin.listQueues());
      expect(await admin.cancel(jobId, {}, orm.plain)).toBe('canceled');
    });

    it("raises the package's typed errors for what the SQL functions refuse, and writes nothing", async () => {
      const options = { idempotencyKey: `order:o-dup:${name}` };
      const first = await queue.enqueue('order.fulfill', { orderId: 'o-dup' }, options, orm.plain);
      expect(await queue.enqueue('order.fulfill', { orderId: 'o-dup' }, options, orm.plain)).toBe(first);
      const conflict = await orm
        .transaction(async (tx) => {
          await orm.insertOrder(tx, 'o-dup');
          return queue.enqueue('order.fulfill', { orderId: 'other' }, options, orm.adapt(tx));
        })
        .catch((error: unknown) => error);
      expect(conflict).toBeInstanceOf(IdempotencyConflictError);
      expect(conflict).toMatchObject({ existingJobId: first, fields: ['payload'], field: 'requests[0].idempotencyKey' });
      expect(await orderExists(db, 'o-dup')).toBe(false);
      // A redrive of a job that is not a dead letter is refused by SQL with a validation error.
      const refused = await admin.redrive(first, { requestId: 'r-1' }, orm.plain).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(WorkhorseValidationError);
      expect(refused).toMatchObject({ field: 'jobId' });
    });

    it("runs on its own on the ORM's plain connection", async () => {
      const jobId = await queue.enqueue('order.fulfill', { orderId: 'o-plain' }, {}, orm.plain);
      expect(await jobExists(db, jobId)).toBe(true);
      expect(await admin.getJob(jobId, orm.plain)).toEqual(await admin.getJob(jobId));
    });

    it("makes the ORM's transaction current inside its TransactionScope, and joins it when nested", async () => {
      expect(orm.scope.current()).toBeUndefined();
      let jobId = '';
      await expect(
        orm.scope.run(async (tx) => {
          await orm.insertOrder(tx, 'o-scope');
          const nested = await orm.scope.run(async (inner) => {
            expect(inner).toBe(tx);
            return queue.enqueue('order.fulfill', { orderId: 'o-scope' }, {}, orm.scope.current());
          });
          jobId = nested;
          expect(await admin.getJob(jobId, orm.scope.current())).toMatchObject({ state: 'ready' });
          throw new Rollback('scope rollback');
        }),
      ).rejects.toBeInstanceOf(Rollback);
      expect(orm.scope.current()).toBeUndefined();
      expect(await orderExists(db, 'o-scope')).toBe(false);
      expect(await jobExists(db, jobId)).toBe(false);

      const committed = await orm.scope.run(async (tx) => {
        await orm.insertOrder(tx, 'o-scope');
        return queue.enqueue('order.fulfill', { orderId: 'o-scope' }, {}, orm.scope.current());
      });
      expect(await orderExists(db, 'o-scope')).toBe(true);
      expect(await jobExists(db, committed)).toBe(true);
    });

    it("makes a transaction opened with the ORM itself current with runWith, and rolls it back with it", async () => {
      let jobId = '';
      await expect(
        orm.transaction((tx) =>
          orm.scope.runWith(tx, async () => {
            expect(orm.scope.tx).toBe(tx);
            jobId = await queue.enqueue('order.fulfill', { orderId: 'o-with' }, {}, orm.scope.current());
            expect(await admin.getJob(jobId, orm.scope.current())).toMatchObject({ state: 'ready' });
            throw new Rollback('runWith rollback');
          }),
        ),
      ).rejects.toBeInstanceOf(Rollback);
      expect(orm.scope.current()).toBeUndefined();
      expect(await jobExists(db, jobId)).toBe(false);
    });
  });
}
