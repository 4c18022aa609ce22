/**
 * The `orders` table (see ORDERS_TABLE_SQL) as each ORM of the integration tests maps it, and
 * the Prisma service of the Nest apps.
 */
import { Module, type DynamicModule, type OnModuleDestroy } from '@nestjs/common';
import { PrismaPg } from '@prisma/adapter-pg';
import { integer, pgTable, text } from 'drizzle-orm/pg-core';
import { Column, Entity, PrimaryColumn } from 'typeorm';
import { PrismaClient } from './prisma/generated/client';

/** TypeORM's entity of `orders`. */
@Entity('orders')
export class OrderEntity {
  @PrimaryColumn('text')
  id!: string;

  @Column('integer', { name: 'amount_cents' })
  amountCents!: number;
}

/** Drizzle's table of `orders`. */
export const ordersTable = pgTable('orders', {
  id: text('id').primaryKey(),
  amountCents: integer('amount_cents').notNull(),
});

/** Kysely's database type (with a CamelCasePlugin: `amountCents` is `amount_cents`). */
export interface KyselyDatabase {
  orders: { id: string; amountCents: number };
}

/** The generated Prisma Client as a Nest provider that disconnects on shutdown. */
export class PrismaService extends PrismaClient implements OnModuleDestroy {
  onModuleDestroy(): Promise<void> {
    return this.$disconnect();
  }
}

@Module({})
export class PrismaModule {
  /** Provides (and exports) a PrismaService on `url`, with `@prisma/adapter-pg`. */
  static forUrl(url: string, global = false): DynamicModule {
    const client = { provide: PrismaService, useFactory: () => new PrismaService({ adapter: new PrismaPg({ connectionString: url, max: 4 }) }) };
    return { module: PrismaModule, global, providers: [client], exports: [PrismaService] };
  }
}
