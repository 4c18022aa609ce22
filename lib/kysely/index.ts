/**
 * nestjs-workhorse/kysely: enqueue and administer jobs inside Kysely transactions, with
 * Kysely's `PostgresDialect`. Needs the `kysely` package.
 *
 * @example
 * import { fromKysely } from 'nestjs-workhorse/kysely';
 * await db.transaction().execute(async (trx) => {
 *   await trx.insertInto('orders').values({ id, amount_cents: amountCents }).execute();
 *   await queue.enqueue('order.fulfill', { id }, {}, fromKysely(trx));
 * });
 */
import { CompiledQuery, type Kysely, type QueryResult, type Transaction } from 'kysely';
import { scopeOf, TransactionScope } from '../core/transaction-scope';
import type { Queryable } from '../core/types';

/** A `Kysely` instance or `Transaction`, as far as {@link fromKysely} uses it. */
export interface KyselyExecutor {
  withoutPlugins(): { executeQuery<R>(query: CompiledQuery<R>): Promise<QueryResult<R>> };
}

/**
 * Turns a `Kysely` instance, or the `Transaction` that `db.transaction().execute` passes to its
 * callback, into what `Queue` and `Admin` accept as their client argument. Given the
 * transaction the job joins it; given the instance each call runs on its own. Statements run
 * without the instance's plugins (a `CamelCasePlugin` would rename the columns that Queue and
 * Admin read), and rows and errors are node-postgres's own.
 *
 * @example
 * await db.transaction().execute(async (trx) => {
 *   await trx.insertInto('orders').values({ id, amount_cents: amountCents }).execute();
 *   await queue.enqueue('order.fulfill', { id }, {}, fromKysely(trx));
 * });
 */
export function fromKysely(db: KyselyExecutor): Queryable {
  const plain = db.withoutPlugins();
  return {
    async query(text, values = []) {
      const result = await plain.executeQuery(CompiledQuery.raw(text, values));
      return { rows: result.rows };
    },
  };
}

/**
 * The {@link TransactionScope} of `db` (the same one on every call), over
 * `db.transaction().execute`: inside `scope.run(async (trx) => ...)`, `Queue` and `Admin` given
 * `transaction: scope` in `WorkhorseModule.forRoot` join the transaction of `trx` without a
 * client argument.
 *
 * @example
 * const transactions = kyselyTransactionScope(db);
 * await transactions.run(async (trx) => {
 *   await trx.insertInto('orders').values({ id, amount_cents: amountCents }).execute();
 *   await queue.enqueue('order.fulfill', { id });
 * });
 */
export function kyselyTransactionScope<DB>(db: Kysely<DB>): TransactionScope<Transaction<DB>> {
  return scopeOf(db, () => new TransactionScope<Transaction<DB>>((fn) => db.transaction().execute(fn), fromKysely));
}
