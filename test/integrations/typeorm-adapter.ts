/**
 * The tests of nestjs-workhorse/typeorm against one TypeORM line on PostgreSQL (typeorm.test.ts
 * runs them on 0.3, typeorm-1.test.ts on 1.x): the conformance suite with a transaction's
 * EntityManager, plus a QueryRunner's own transaction and a DataSource.
 */
import { Queue } from 'nestjs-workhorse/core';
import { fromTypeOrm, typeormTransactionScope } from 'nestjs-workhorse/typeorm';
import type * as TypeOrm from 'typeorm';
import type { DataSource, EntityManager } from 'typeorm';
import { describeOrmConformance, ORDERS_TABLE_SQL } from './orm-conformance';
import { createTestDatabase } from '../support/db';

/** A TypeORM package, typed as 0.3 declares it (1.x keeps every member used here). */
export type TypeOrmPackage = typeof TypeOrm;

/** Declares the adapter's tests on `orm`, the TypeORM package of `line` ('TypeORM 0.3', ...). */
export function describeTypeOrmAdapter(line: string, orm: TypeOrmPackage): void {
  /** The `orders` table, mapped with this package's own decorators. */
  @orm.Entity('orders')
  class OrderEntity {
    @orm.PrimaryColumn('text')
    id!: string;

    @orm.Column('integer', { name: 'amount_cents' })
    amountCents!: number;
  }

  async function openDataSource(url: string): Promise<DataSource> {
    return new orm.DataSource({ type: 'postgres', url, entities: [OrderEntity], poolSize: 4 }).initialize();
  }

  describeOrmConformance<EntityManager>(`${line} (EntityManager)`, async (db) => {
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

  describe(`${line}: the QueryRunner and the DataSource`, () => {
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
}
