import type { TransactionSource } from '../core/transaction-scope';
import type { Queryable } from '../core/types';

/** What {@link clsTransactionSource} reads of `@nestjs-cls/transactional`'s `TransactionHost`. */
export interface ClsTransactionHost<Tx> {
  readonly tx: Tx;
  isTransactionActive(): boolean;
}

/**
 * The transaction of `@nestjs-cls/transactional` as the `transaction` option of
 * `WorkhorseModule`: inside a method decorated with its `@Transactional()` (or
 * `txHost.withTransaction(...)`), the injected `Queue` and `Admin` join that transaction with no
 * client argument. `toQueryable` is the entry point of the adapter's ORM (`fromTypeOrm`,
 * `fromPrisma`, `fromDrizzle`, `fromKysely`); with {@link TransactionalAdapterPg} leave it out.
 *
 * @example
 * WorkhorseModule.forRootAsync({
 *   inject: [TransactionHost],
 *   useFactory: (txHost: TransactionHost<TransactionalAdapterTypeOrm>) => ({
 *     connectionString: process.env.DATABASE_URL,
 *     transaction: clsTransactionSource(txHost, fromTypeOrm),
 *   }),
 * });
 */
export function clsTransactionSource(txHost: ClsTransactionHost<Queryable>): TransactionSource;
export function clsTransactionSource<Tx>(txHost: ClsTransactionHost<Tx>, toQueryable: (tx: Tx) => Queryable): TransactionSource;
export function clsTransactionSource<Tx>(txHost: ClsTransactionHost<Tx>, toQueryable?: (tx: Tx) => Queryable): TransactionSource {
  const adapt = toQueryable ?? ((tx: Tx) => tx as Queryable);
  // Outside a transaction `tx` is the adapter's fallback (the pool, the client): not one to join.
  return { current: () => (txHost.isTransactionActive() ? adapt(txHost.tx) : undefined) };
}
