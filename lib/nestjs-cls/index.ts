/**
 * nestjs-workhorse/nestjs-cls: interop with `@nestjs-cls/transactional`. With any of its adapters
 * (TypeORM, Prisma, Drizzle, Kysely, or {@link TransactionalAdapterPg} for plain `pg`, which this
 * entry point ships), a method decorated with its `@Transactional()` makes the injected `Queue`
 * and `Admin` join its transaction. Needs `nestjs-cls` and `@nestjs-cls/transactional`.
 *
 * @example
 * import { clsTransactionSource } from 'nestjs-workhorse/nestjs-cls';
 * import { fromTypeOrm } from 'nestjs-workhorse/typeorm';
 * WorkhorseModule.forRootAsync({
 *   inject: [TransactionHost],
 *   useFactory: (txHost: TransactionHost<TransactionalAdapterTypeOrm>) => ({
 *     connectionString: process.env.DATABASE_URL,
 *     transaction: clsTransactionSource(txHost, fromTypeOrm),
 *   }),
 * });
 */
export { clsTransactionSource, type ClsTransactionHost } from './cls-transaction.source';
export {
  TransactionalAdapterPg,
  type PgTransaction,
  type PgTransactionalAdapterOptions,
  type PgTransactionOptions,
} from './transactional-pg.adapter';
