/**
 * The `transaction` option of WorkhorseModule with TypeORM (through @nestjs/typeorm) and Prisma:
 * inside the ORM's transaction, opened through the ORM's TransactionScope, the injected Queue
 * and Admin join it with no client argument, so the business row and the job commit together
 * and roll back together; outside it they use the pool, and the host's own @Transactional()
 * still works.
 */
import { Injectable, Module, type DynamicModule, type OnModuleDestroy } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { PrismaPg } from '@prisma/adapter-pg';
import { Admin, Queue, Transactional, WorkhorseModule, WorkhorseTransactionHost, type JobSnapshot } from 'nestjs-workhorse';
import { prismaTransactionScope } from 'nestjs-workhorse/prisma';
import { typeormTransactionScope } from 'nestjs-workhorse/typeorm';
import { Column, DataSource, Entity, PrimaryColumn } from 'typeorm';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { quietNestLogs, startModule, stateOf } from '../nest/support';
import { ORDERS_TABLE_SQL } from './orm-conformance';
import { PrismaClient } from './prisma/generated/client';

@Entity('orders')
class OrderEntity {
  @PrimaryColumn('text')
  id!: string;

  @Column('integer', { name: 'amount_cents' })
  amountCents!: number;
}

interface Placed {
  jobId: string;
  /** What the injected Admin saw inside the transaction, before the commit. */
  seen: JobSnapshot | null;
}

/** The business service of each app: write an order with the ORM and enqueue, in one transaction. */
interface OrdersService {
  place(id: string, fail?: boolean): Promise<Placed>;
  /** What the last `place` did inside its transaction, also when it then threw. */
  last: Placed | undefined;
}

@Injectable()
class TypeOrmOrders implements OrdersService {
  last: Placed | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly queue: Queue,
    private readonly admin: Admin,
  ) {}

  place(id: string, fail = false): Promise<Placed> {
    return typeormTransactionScope(this.dataSource).run(async (manager) => {
      await manager.insert(OrderEntity, { id, amountCents: 100 });
      const jobId = await this.queue.enqueue('order.fulfill', { orderId: id });
      this.last = { jobId, seen: await this.admin.getJob(jobId) };
      if (fail) throw new Error('payment refused');
      return this.last;
    });
  }
}

class PrismaService extends PrismaClient implements OnModuleDestroy {
  onModuleDestroy(): Promise<void> {
    return this.$disconnect();
  }
}

@Module({})
class PrismaModule {
  static forUrl(url: string): DynamicModule {
    const client = { provide: PrismaService, useFactory: () => new PrismaService({ adapter: new PrismaPg({ connectionString: url, max: 4 }) }) };
    return { module: PrismaModule, global: true, providers: [client], exports: [PrismaService] };
  }
}

@Injectable()
class PrismaOrders implements OrdersService {
  last: Placed | undefined;

  constructor(
    private readonly prisma: PrismaService,
    private readonly queue: Queue,
    private readonly admin: Admin,
  ) {}

  place(id: string, fail = false): Promise<Placed> {
    return prismaTransactionScope(this.prisma).run(async (tx) => {
      await tx.order.create({ data: { id, amountCents: 100 } });
      const jobId = await this.queue.enqueue('order.fulfill', { orderId: id });
      this.last = { jobId, seen: await this.admin.getJob(jobId) };
      if (fail) throw new Error('payment refused');
      return this.last;
    });
  }
}

/** Uses the host's own transaction, beside the ORM's option. */
@Injectable()
class PlainOrders {
  constructor(
    private readonly tx: WorkhorseTransactionHost,
    private readonly queue: Queue,
  ) {}

  @Transactional()
  async place(id: string): Promise<string> {
    await this.tx.query('INSERT INTO orders (id, amount_cents) VALUES ($1, 1)', [id]);
    return this.queue.enqueue('order.fulfill', { orderId: id });
  }
}

const apps: [string, (url: string) => Promise<TestingModule>, new (...args: never[]) => OrdersService][] = [
  [
    'TypeORM (@nestjs/typeorm)',
    (url) =>
      startModule({
        imports: [
          TypeOrmModule.forRoot({ type: 'postgres', url, entities: [OrderEntity], poolSize: 4 }),
          WorkhorseModule.forRootAsync({
            inject: [DataSource],
            useFactory: (dataSource: DataSource) => ({ connectionString: url, transaction: typeormTransactionScope(dataSource) }),
          }),
        ],
        providers: [TypeOrmOrders, PlainOrders],
      }),
    TypeOrmOrders,
  ],
  [
    'Prisma',
    (url) =>
      startModule({
        imports: [
          PrismaModule.forUrl(url),
          WorkhorseModule.forRootAsync({
            inject: [PrismaService],
            useFactory: (prisma: PrismaService) => ({ connectionString: url, transaction: prismaTransactionScope(prisma) }),
          }),
        ],
        providers: [PrismaOrders, PlainOrders],
      }),
    PrismaOrders,
  ],
];

describe.each(apps)("%s: the injected Queue and Admin join the ORM's transaction", (_name, start, service) => {
  let db: TestDatabase;
  let app: TestingModule;
  let orders: OrdersService;

  const orderExists = async (id: string) => (await db.pool.query('SELECT 1 FROM orders WHERE id = $1', [id])).rows.length === 1;

  beforeAll(async () => {
    quietNestLogs();
    db = await createTestDatabase();
    await db.pool.query(ORDERS_TABLE_SQL);
    app = await start(db.url);
    orders = app.get(service);
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('commits the order and its job together, and Admin saw the job inside the transaction', async () => {
    const { jobId, seen } = await orders.place('o-1');
    expect(seen).toMatchObject({ id: jobId, state: 'ready', payload: { orderId: 'o-1' } });
    expect(await orderExists('o-1')).toBe(true);
    expect(await stateOf(db.pool, jobId)).toBe('ready');
  });

  it('rolls back the order and its job together when the transaction throws', async () => {
    await expect(orders.place('o-2', true)).rejects.toThrow('payment refused');
    const inside = orders.last;
    expect(inside?.seen).toMatchObject({ state: 'ready', payload: { orderId: 'o-2' } });
    expect(await stateOf(db.pool, inside?.jobId ?? '')).toBeNull();
    expect(await orderExists('o-2')).toBe(false);
  });

  it('uses the pool outside the transaction, and the host transaction where the ORM reports none', async () => {
    const queue = app.get(Queue);
    const alone = await queue.enqueue('order.fulfill', { orderId: 'o-3' });
    expect(await stateOf(db.pool, alone)).toBe('ready');
    const hosted = await app.get(PlainOrders).place('o-4');
    expect(await stateOf(db.pool, hosted)).toBe('ready');
    expect(await orderExists('o-4')).toBe(true);
  });
});
