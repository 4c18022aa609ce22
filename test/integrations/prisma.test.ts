/**
 * nestjs-workhorse/prisma against Prisma 7 (generated client, `@prisma/adapter-pg`): the
 * conformance suite with an interactive transaction's client (Prisma reads int8 as BigInt and
 * reports failures as its own errors; the adapter must give what node-postgres gives).
 */
import { PrismaPg } from '@prisma/adapter-pg';
import { fromPrisma, prismaTransactionScope } from 'nestjs-workhorse/prisma';
import { describeOrmConformance } from './orm-conformance';
import { PrismaClient } from './prisma/generated/client';

type PrismaTransaction = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

describeOrmConformance<PrismaTransaction>('Prisma (interactive transaction)', async (db) => {
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: db.url, max: 4 }) });
  return {
    transaction: (fn) => prisma.$transaction(fn),
    insertOrder: async (tx, id) => {
      await tx.order.create({ data: { id, amountCents: 4200 } });
    },
    adapt: fromPrisma,
    plain: fromPrisma(prisma),
    scope: prismaTransactionScope(prisma),
    close: () => prisma.$disconnect(),
  };
});
