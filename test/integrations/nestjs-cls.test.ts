/**
 * Interop with @nestjs-cls/transactional in Nest apps with nestjs-cls: with its TypeORM, Prisma
 * and Drizzle adapters, and with the node-postgres adapter this package ships, a method
 * decorated with its @Transactional() makes the injected Queue and Admin join its transaction
 * (`transaction: clsTransactionSource(txHost, ...)`): the order row and the job commit together
 * and roll back together. The pg adapter's isolation levels and nested savepoints are checked too.
 */
import { Propagation, Transactional, TransactionHost, ClsPluginTransactional } from '@nestjs-cls/transactional';
import { TransactionalAdapterDrizzleOrm } from '@nestjs-cls/transactional-adapter-drizzle-orm';
import { TransactionalAdapterPrisma } from '@nestjs-cls/transactional-adapter-prisma';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Inject, Injectable, Module, type DynamicModule, type OnModuleDestroy } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { ClsModule } from 'nestjs-cls';
import { Admin, Pool, Queue, WorkhorseModule, type TransactionSource } from 'nestjs-workhorse';
import { fromDrizzle } from 'nestjs-workhorse/drizzle';
import { clsTransactionSource, TransactionalAdapterPg } from 'nestjs-workhorse/nestjs-cls';
import { fromPrisma } from 'nestjs-workhorse/prisma';
import { fromTypeOrm } from 'nestjs-workhorse/typeorm';
import { DataSource } from 'typeorm';
import { quietNestLogs, startModule } from '../nest/support';
import { stateOf } from '../support/job-state';
import { describeNestAppsJoin, type OrdersPlacer, type Placed } from './nest-app-conformance';
import { ORDERS_TABLE_SQL } from './orm-conformance';
import { OrderEntity, ordersTable, PrismaModule, PrismaService } from './orm-models';
import { useTestDatabase } from '../support/test-database';

/** Writes the order with the adapter's transaction and enqueues with the injected Queue. */
abstract class OrdersService implements OrdersPlacer {
  last: Placed | undefined;

  constructor(
    protected readonly queue: Queue,
    protected readonly admin: Admin,
  ) {}

  protected abstract insertOrder(id: string): Promise<void>;

  @Transactional()
  async place(id: string, fail = false): Promise<Placed> {
    await this.insertOrder(id);
    const jobId = await this.queue.enqueue('order.fulfill', { orderId: id });
    this.last = { jobId, seen: await this.admin.getJob(jobId) };
    if (fail) throw new Error('payment refused');
    return this.last;
  }
}

// ---- TypeORM

@Injectable()
class TypeOrmOrders extends OrdersService {
  constructor(queue: Queue, admin: Admin, private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {
    super(queue, admin);
  }

  protected async insertOrder(id: string): Promise<void> {
    await this.txHost.tx.insert(OrderEntity, { id, amountCents: 100 });
  }
}

function typeormApp(url: string): Promise<TestingModule> {
  return startModule({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url, entities: [OrderEntity], poolSize: 4 }),
      ClsModule.forRoot({
        global: true,
        plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }) })],
      }),
      WorkhorseModule.forRootAsync({
        inject: [TransactionHost],
        useFactory: (txHost: TransactionHost<TransactionalAdapterTypeOrm>) => ({
          connectionString: url,
          transaction: clsTransactionSource(txHost, fromTypeOrm),
        }),
      }),
    ],
    providers: [TypeOrmOrders],
  });
}

// ---- Prisma

type PrismaAdapter = TransactionalAdapterPrisma<PrismaService>;

@Injectable()
class PrismaOrders extends OrdersService {
  constructor(queue: Queue, admin: Admin, private readonly txHost: TransactionHost<PrismaAdapter>) {
    super(queue, admin);
  }

  protected async insertOrder(id: string): Promise<void> {
    await this.txHost.tx.order.create({ data: { id, amountCents: 100 } });
  }
}

function prismaApp(url: string): Promise<TestingModule> {
  const prisma = PrismaModule.forUrl(url);
  return startModule({
    imports: [
      ClsModule.forRoot({
        global: true,
        plugins: [new ClsPluginTransactional({ imports: [prisma], adapter: new TransactionalAdapterPrisma({ prismaInjectionToken: PrismaService }) })],
      }),
      WorkhorseModule.forRootAsync({
        inject: [TransactionHost],
        useFactory: (txHost: TransactionHost<PrismaAdapter>) => ({
          connectionString: url,
          transaction: clsTransactionSource(txHost, fromPrisma),
        }),
      }),
    ],
    providers: [PrismaOrders],
  });
}

/**
 * A pool of the test's own app, with the `error` listener pg asks its owner for (as test/support's
 * pools): an idle connection ended by the database's `DROP ... WITH (FORCE)` (an app whose start
 * outlived its hook on a loaded machine is still open then) must not crash the test process.
 */
function ownedPool(url: string): Pool {
  const pool = new Pool({ connectionString: url, max: 4 });
  pool.on('error', () => undefined);
  return pool;
}

// ---- Drizzle

const DRIZZLE = Symbol('drizzle');
type Drizzle = NodePgDatabase & { $client: Pool };
type DrizzleAdapter = TransactionalAdapterDrizzleOrm<Drizzle>;

@Injectable()
class DrizzleOrders extends OrdersService {
  constructor(queue: Queue, admin: Admin, private readonly txHost: TransactionHost<DrizzleAdapter>) {
    super(queue, admin);
  }

  protected async insertOrder(id: string): Promise<void> {
    await this.txHost.tx.insert(ordersTable).values({ id, amountCents: 100 });
  }
}

@Injectable()
class DrizzleShutdown implements OnModuleDestroy {
  constructor(@Inject(DRIZZLE) private readonly db: Drizzle) {}

  onModuleDestroy(): Promise<void> {
    return this.db.$client.end();
  }
}

@Module({})
class DrizzleModule {
  static forUrl(url: string): DynamicModule {
    const db = { provide: DRIZZLE, useFactory: () => drizzle(ownedPool(url)) };
    return { module: DrizzleModule, providers: [db, DrizzleShutdown], exports: [DRIZZLE] };
  }
}

function drizzleApp(url: string): Promise<TestingModule> {
  return startModule({
    imports: [
      ClsModule.forRoot({
        global: true,
        plugins: [
          new ClsPluginTransactional({
            imports: [DrizzleModule.forUrl(url)],
            adapter: new TransactionalAdapterDrizzleOrm<Drizzle>({ drizzleInstanceToken: DRIZZLE }),
          }),
        ],
      }),
      WorkhorseModule.forRootAsync({
        inject: [TransactionHost],
        useFactory: (txHost: TransactionHost<DrizzleAdapter>) => ({ connectionString: url, transaction: clsTransactionSource(txHost, fromDrizzle) }),
      }),
    ],
    providers: [DrizzleOrders],
  });
}

// ---- node-postgres, with the adapter this package ships

@Injectable()
class PoolShutdown implements OnModuleDestroy {
  constructor(private readonly pool: Pool) {}

  onModuleDestroy(): Promise<void> {
    return this.pool.end();
  }
}

@Module({})
class PoolModule {
  static forUrl(url: string): DynamicModule {
    const pool = { provide: Pool, useFactory: () => ownedPool(url) };
    return { module: PoolModule, global: true, providers: [pool, PoolShutdown], exports: [Pool] };
  }
}

@Injectable()
class PgOrders extends OrdersService {
  constructor(queue: Queue, admin: Admin, readonly txHost: TransactionHost<TransactionalAdapterPg>) {
    super(queue, admin);
  }

  protected async insertOrder(id: string): Promise<void> {
    await this.txHost.tx.query('INSERT INTO orders (id, amount_cents) VALUES ($1, 100)', [id]);
  }

  @Transactional<TransactionalAdapterPg>({ isolationLevel: 'serializable', readOnly: true })
  async isolation(): Promise<string[]> {
    const { rows } = await this.txHost.tx.query<{ level: string; ro: string }>(
      "SELECT current_setting('transaction_isolation') AS level, current_setting('transaction_read_only') AS ro",
    );
    return [rows[0].level, rows[0].ro];
  }

  /** Places `outer`, then `inner` in a savepoint that fails; the outer transaction commits. */
  @Transactional()
  async placeWithFailedNested(outer: string, inner: string): Promise<string> {
    const { jobId } = await this.place(outer);
    await this.placeNested(inner).catch(() => undefined);
    return jobId;
  }

  @Transactional(Propagation.Nested)
  async placeNested(id: string): Promise<Placed> {
    return this.place(id, true);
  }
}

function pgApp(url: string): Promise<TestingModule> {
  return startModule({
    imports: [
      PoolModule.forUrl(url),
      ClsModule.forRoot({
        global: true,
        plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterPg({ poolToken: Pool }) })],
      }),
      WorkhorseModule.forRootAsync({
        inject: [TransactionHost, Pool],
        useFactory: (txHost: TransactionHost<TransactionalAdapterPg>, pool: Pool) => ({
          pool,
          transaction: clsTransactionSource(txHost),
        }),
      }),
    ],
    providers: [PgOrders],
  });
}

describeNestAppsJoin('@nestjs-cls/transactional with %s: @Transactional() makes Queue and Admin join its transaction', [
  ['its TypeORM adapter', typeormApp, TypeOrmOrders],
  ['its Prisma adapter', prismaApp, PrismaOrders],
  ['its Drizzle adapter', drizzleApp, DrizzleOrders],
  ['the node-postgres adapter of nestjs-workhorse', pgApp, PgOrders],
]);

describe('TransactionalAdapterPg', () => {
  const { db } = useTestDatabase({
    checkInvariants: false,
    beforeDrop: () => app?.close(),
  });
  let app: TestingModule;
  let pgOrders: PgOrders;

  beforeAll(async () => {
    quietNestLogs();
    await db.pool.query(ORDERS_TABLE_SQL);
    app = await pgApp(db.url);
    pgOrders = app.get(PgOrders);
  });

  it('begins with the isolation level and access mode the decorator asks for', async () => {
    expect(await pgOrders.isolation()).toEqual(['serializable', 'on']);
  });

  it('rolls a Propagation.Nested method back to its savepoint, job included, and commits the outer one', async () => {
    const outerJob = await pgOrders.placeWithFailedNested('o-outer', 'o-inner');
    const innerJob = pgOrders.last?.jobId ?? '';
    expect(innerJob).not.toBe(outerJob);
    expect(await stateOf(db.pool, outerJob)).toBe('ready');
    expect(await stateOf(db.pool, innerJob)).toBeNull();
    const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM orders ORDER BY id');
    expect(rows.map((row) => row.id)).toEqual(['o-outer']);
  });

  it('gives the pool as txHost.tx outside a transaction, and the source reports none there', () => {
    expect(pgOrders.txHost.tx).toBe(app.get(Pool));
    const source: TransactionSource = clsTransactionSource(pgOrders.txHost);
    expect(source.current()).toBeUndefined();
  });
});
