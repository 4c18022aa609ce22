/**
 * The trap of the ORM's own transaction, with TypeORM (through @nestjs/typeorm): inside
 * `dataSource.transaction(cb)` the injected Queue cannot see the transaction, so an enqueue
 * without the manager commits on the pool and stays when the order rolls back. With
 * `requireTransaction: true` such an enqueue is refused (TransactionRequiredError, nothing
 * written) while the right ways (the manager handed over, the scope, the pool on purpose) work;
 * without it, in development and with the `transaction` option, it is warned about once per call
 * site, and not at all when NODE_ENV is production.
 */
import { Injectable, Logger } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Queue, TransactionRequiredError, WorkhorseModule, WorkhorseTransactionError, type WorkhorseModuleOptions } from 'nestjs-workhorse';
import { fromTypeOrm, typeormTransactionScope } from 'nestjs-workhorse/typeorm';
import { DataSource } from 'typeorm';
import { countJobs, quietNestLogs, startModule } from '../nest/support';
import { useTestDatabase } from '../support/test-database';
import { ORDERS_TABLE_SQL } from './orm-conformance';
import { OrderEntity } from './orm-models';

/** Places orders the wrong way (the ORM's own transaction, the manager not handed over) and the right ways. */
@Injectable()
class Orders {
  constructor(
    private readonly dataSource: DataSource,
    private readonly queue: Queue,
  ) {}

  /** The trap: the job is enqueued on the pool, then the order rolls back. */
  placeWithoutManager(id: string): Promise<void> {
    return this.dataSource.transaction(async (manager) => {
      await manager.insert(OrderEntity, { id, amountCents: 100 });
      await this.queue.enqueue('order.fulfill', { orderId: id });
      throw new Error('payment refused');
    });
  }

  /** The same trap at another call site, through enqueueMany. */
  placeManyWithoutManager(id: string): Promise<void> {
    return this.dataSource.transaction(async (manager) => {
      await manager.insert(OrderEntity, { id, amountCents: 100 });
      await this.queue.enqueueMany([{ type: 'order.fulfill', payload: { orderId: id } }]);
      throw new Error('payment refused');
    });
  }

  placeWithManager(id: string): Promise<string> {
    return this.dataSource.transaction(async (manager) => {
      await manager.insert(OrderEntity, { id, amountCents: 100 });
      return this.queue.enqueue('order.fulfill', { orderId: id }, {}, fromTypeOrm(manager));
    });
  }

  placeThroughScope(id: string): Promise<string> {
    return typeormTransactionScope(this.dataSource).run(async (manager) => {
      await manager.insert(OrderEntity, { id, amountCents: 100 });
      return this.queue.enqueue('order.fulfill', { orderId: id });
    });
  }
}

function startApp(url: string, options: Partial<WorkhorseModuleOptions>): Promise<TestingModule> {
  return startModule({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url, entities: [OrderEntity], poolSize: 4 }),
      WorkhorseModule.forRootAsync({
        inject: [DataSource],
        useFactory: (dataSource: DataSource) => ({ connectionString: url, transaction: typeormTransactionScope(dataSource), ...options }),
      }),
    ],
    providers: [Orders],
  });
}

async function orderExists(app: TestingModule, id: string): Promise<boolean> {
  return (await app.get(DataSource).query('SELECT 1 FROM orders WHERE id = $1', [id])).length === 1;
}

/** The warnings the module logs while `fn` runs. */
async function warningsDuring(fn: () => Promise<unknown>): Promise<string[]> {
  const warnings: string[] = [];
  const spy = jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => void warnings.push(String(message)));
  try {
    await fn();
  } finally {
    spy.mockRestore();
  }
  return warnings;
}

describe('requireTransaction: true', () => {
  const { db } = useTestDatabase({ checkInvariants: false, beforeDrop: () => app?.close() });
  let app: TestingModule;

  beforeAll(async () => {
    quietNestLogs();
    await db.pool.query(ORDERS_TABLE_SQL);
    app = await startApp(db.url, { requireTransaction: true });
  });

  it("refuses an enqueue inside the ORM's own transaction, so the order and the job roll back together", async () => {
    const error = await app
      .get(Orders)
      .placeWithoutManager('o-1')
      .catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(TransactionRequiredError);
    expect(error).toBeInstanceOf(WorkhorseTransactionError);
    expect((error as Error).message).toContain('queue.enqueue("order.fulfill") ran outside any transaction');
    expect((error as Error).message).toContain('fromTypeOrm(manager)');
    await expect(app.get(Orders).placeManyWithoutManager('o-2')).rejects.toBeInstanceOf(TransactionRequiredError);
    expect(await countJobs(db.pool, 'order.fulfill')).toBe(0);
    expect(await orderExists(app, 'o-1')).toBe(false);
  });

  it('refuses an enqueue outside any transaction, and takes the transaction handed over, the scope and the pool given on purpose', async () => {
    const queue = app.get(Queue);
    await expect(queue.enqueue('order.fulfill', { orderId: 'x' })).rejects.toBeInstanceOf(TransactionRequiredError);
    await expect(queue.enqueueMany([{ type: 'order.fulfill', payload: { orderId: 'x' } }])).rejects.toBeInstanceOf(TransactionRequiredError);
    expect(await countJobs(db.pool, 'order.fulfill')).toBe(0);

    await app.get(Orders).placeWithManager('o-3');
    await app.get(Orders).placeThroughScope('o-4');
    await queue.enqueue('order.fulfill', { orderId: 'alone' }, {}, queue.pool);
    expect(await countJobs(db.pool, 'order.fulfill')).toBe(3);
    expect(await orderExists(app, 'o-3')).toBe(true);
    expect(await orderExists(app, 'o-4')).toBe(true);
  });
});

describe('the warning about an enqueue outside any transaction (transaction option set, no request transactions)', () => {
  const { db } = useTestDatabase({ checkInvariants: false, beforeDrop: () => Promise.all([app?.close(), production?.close()]) });
  let app: TestingModule;
  let production: TestingModule | undefined;

  beforeAll(async () => {
    quietNestLogs();
    await db.pool.query(ORDERS_TABLE_SQL);
    app = await startApp(db.url, {});
  });

  it("is said once per call site, naming it, when the job escapes the ORM's rolled back transaction", async () => {
    const orders = app.get(Orders);
    const warnings = await warningsDuring(async () => {
      for (const id of ['o-1', 'o-2', 'o-3']) await expect(orders.placeWithoutManager(id)).rejects.toThrow('payment refused');
      await expect(orders.placeManyWithoutManager('o-4')).rejects.toThrow('payment refused');
    });
    // The trap itself: the orders rolled back, their jobs stayed.
    expect(await countJobs(db.pool, 'order.fulfill')).toBe(4);
    expect(await orderExists(app, 'o-1')).toBe(false);

    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toContain('queue.enqueue("order.fulfill") at ');
    expect(warnings[0]).toContain('nest-orm-outside-transaction.test.ts');
    expect(warnings[0]).toContain('ran outside any transaction, so it committed on its own');
    expect(warnings[1]).toContain('queue.enqueueMany(["order.fulfill"]) at ');
  });

  it('is not said for an enqueue given its transaction, through the scope, or given the pool', async () => {
    const queue = app.get(Queue);
    const warnings = await warningsDuring(async () => {
      await app.get(Orders).placeWithManager('o-5');
      await app.get(Orders).placeThroughScope('o-6');
      await queue.enqueue('order.fulfill', { orderId: 'alone' }, {}, queue.pool);
    });
    expect(warnings).toEqual([]);
  });

  it('is not said when NODE_ENV is production', async () => {
    const env = process.env.NODE_ENV;
    process.env.NODE_ENV = 'production';
    try {
      production = await startApp(db.url, {});
    } finally {
      if (env === undefined) delete process.env.NODE_ENV;
      else process.env.NODE_ENV = env;
    }
    const before = await countJobs(db.pool, 'order.fulfill');
    const warnings = await warningsDuring(() => expect(production?.get(Orders).placeWithoutManager('p-1')).rejects.toThrow('payment refused'));
    expect(warnings).toEqual([]);
    expect(await countJobs(db.pool, 'order.fulfill')).toBe(before + 1);
  });
});
