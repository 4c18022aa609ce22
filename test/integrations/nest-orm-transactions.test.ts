/**
 * The `transaction` option of WorkhorseModule with TypeORM (through @nestjs/typeorm) and Prisma:
 * inside the ORM's transaction, opened through the ORM's TransactionScope, the injected Queue
 * and Admin join it with no client argument (see nest-app-conformance.ts); where the ORM reports
 * no transaction, the host's own @Transactional() still works.
 */
import { Injectable } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Admin, Queue, Transactional, WorkhorseModule, WorkhorseTransactionHost } from 'nestjs-workhorse';
import { prismaTransactionScope } from 'nestjs-workhorse/prisma';
import { typeormTransactionScope } from 'nestjs-workhorse/typeorm';
import { DataSource } from 'typeorm';
import { startModule } from '../nest/support';
import { stateOf } from '../support/job-state';
import { describeNestAppsJoin, type OrdersPlacer, type Placed } from './nest-app-conformance';
import { OrderEntity, PrismaModule, PrismaService } from './orm-models';

@Injectable()
class TypeOrmOrders implements OrdersPlacer {
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

@Injectable()
class PrismaOrders implements OrdersPlacer {
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

describeNestAppsJoin(
  "%s: the injected Queue and Admin join the ORM's transaction",
  [
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
            PrismaModule.forUrl(url, true),
            WorkhorseModule.forRootAsync({
              inject: [PrismaService],
              useFactory: (prisma: PrismaService) => ({ connectionString: url, transaction: prismaTransactionScope(prisma) }),
            }),
          ],
          providers: [PrismaOrders, PlainOrders],
        }),
      PrismaOrders,
    ],
  ],
  (running) => {
    it("uses the host's own transaction where the ORM reports none", async () => {
      const { app, db } = running();
      const jobId = await app.get(PlainOrders).place('o-4');
      expect(await stateOf(db.pool, jobId)).toBe('ready');
      expect((await db.pool.query("SELECT 1 FROM orders WHERE id = 'o-4'")).rows).toHaveLength(1);
    });
  },
);
