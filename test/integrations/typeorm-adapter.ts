/**
 * nestjs-workhorse/typeorm against TypeORM 0.3 on PostgreSQL: the conformance suite with a
 * transaction's EntityManager, plus a QueryRunner's own transaction and a DataSource.
 */
import { Queue } from 'nestjs-workhorse/core';
import { fromTypeOrm, typeormTransactionScope } from 'nestjs-workhorse/typeorm';
import { DataSource, type EntityManager } from 'typeorm';
import { describeOrmConformance, ORDERS_TABLE_SQL } from './orm-conformance';
import { OrderEntity } from './orm-models';
import { createTestDatabase } from '../support/db';

async function openDataSource(url: string): Promise<DataSource> {
  return new DataSource({ type: 'postgres', url, entities: [OrderEntity], poolSize: 4 }).initialize();
}

describeOrmConformance<EntityManager>('TypeORM (EntityManager)', async (db) => {
  const dataSource = await openDataSource(db.url);
  return {
    transaction: (fn) => dataSource.transaction(fn),
    insertOrder: async (manager, id) => {
      await manager.insert(OrderEntity, { id, amountCents: 4200 });
    },
    adapt: fromTypeOrm,
    plain: fromTypeOrm(dataSource),
    scope: typeormTransactionScope(dataSource),
    close: () => dataSource.destroy(),
  };
});

describe("TypeORM's QueryRunner and DataSource", () => {
  it("joins a QueryRunner's transaction, and the DataSource's manager runs on its own", async () => {
    const db = await createTestDatabase();
    await db.pool.query(ORDERS_TABLE_SQL);
    const dataSource = await openDataSource(db.url);
    try {
      const queue = new Queue(db.pool);
      const runner = dataSource.createQueryRunner();
      await runner.startTransaction();
      await runner.manager.insert(OrderEntity, { id: 'o-runner', amountCents: 1 });
      const rolledBack = await queue.enqueue('order.fulfill', { orderId: 'o-runner' }, {}, fromTypeOrm(runner));
      await runner.rollbackTransaction();
      await runner.startTransaction();
      const committed = await queue.enqueue('order.fulfill', { orderId: 'o-runner' }, {}, fromTypeOrm(runner));
      await runner.commitTransaction();
      await runner.release();
      const alone = await queue.enqueue('order.fulfill', { orderId: 'o-manager' }, {}, fromTypeOrm(dataSource.manager));

      const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM workhorse.job ORDER BY id');
      expect(rows.map((row) => row.id)).toEqual([committed, alone].sort());
      expect(rows.map((row) => row.id)).not.toContain(rolledBack);
      expect((await db.pool.query('SELECT * FROM orders')).rows).toEqual([]);
    } finally {
      await dataSource.destroy();
      await db.drop();
    }
  });
});
