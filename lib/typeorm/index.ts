/**
 * nestjs-workhorse/typeorm: enqueue and administer jobs inside TypeORM transactions. Needs the
 * `typeorm` package (0.3 or 1.x, PostgreSQL driver); nothing else of this package loads it.
 *
 * @example
 * import { fromTypeOrm } from 'nestjs-workhorse/typeorm';
 * await dataSource.transaction(async (manager) => {
 *   await manager.insert(OrderEntity, { id });
 *   await queue.enqueue('order.fulfill', { id }, {}, fromTypeOrm(manager));
 * });
 */
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { scopeOf, TransactionScope } from '../core/transaction-scope';
import type { Queryable } from '../core/types';

/** What {@link fromTypeOrm} accepts. */
export type TypeOrmConnection = DataSource | EntityManager | QueryRunner;

function isQueryRunner(source: TypeOrmConnection): source is QueryRunner {
  return typeof (source as Partial<QueryRunner>).startTransaction === 'function';
}

function isDataSource(source: TypeOrmConnection): source is DataSource {
  return typeof (source as Partial<DataSource>).createQueryRunner === 'function';
}

async function onRunner(runner: QueryRunner, text: string, values: unknown[] | undefined): Promise<{ rows: unknown[] }> {
  // The structured result carries the rows of every statement kind (the plain one does not).
  const result = await runner.query(text, values, true);
  return { rows: result.records };
}

async function onDataSource(dataSource: DataSource, text: string, values: unknown[] | undefined): Promise<{ rows: unknown[] }> {
  const runner = dataSource.createQueryRunner();
  try {
    return await onRunner(runner, text, values);
  } finally {
    await runner.release();
  }
}

/**
 * Turns a TypeORM connection into what `Queue` and `Admin` accept as their client argument:
 * - an `EntityManager` of a transaction (the one `dataSource.transaction(cb)` passes to `cb`),
 *   or a `QueryRunner` you started a transaction on: the job joins that transaction;
 * - a `DataSource` (or its `manager`): each call runs on its own, outside any transaction.
 *
 * Errors keep TypeORM's `QueryFailedError`, which carries PostgreSQL's SQLSTATE, so invalid
 * input and idempotency conflicts still raise this package's typed errors.
 *
 * @example
 * await dataSource.transaction(async (manager) => {
 *   await manager.insert(OrderEntity, { id });
 *   await queue.enqueue('order.fulfill', { id }, {}, fromTypeOrm(manager));
 * });
 */
export function fromTypeOrm(source: TypeOrmConnection): Queryable {
  if (isQueryRunner(source)) return { query: (text, values) => onRunner(source, text, values) };
  if (isDataSource(source)) return { query: (text, values) => onDataSource(source, text, values) };
  // A manager of a transaction is bound to its query runner; any other uses its data source.
  const manager = source;
  return {
    query: (text, values) =>
      manager.queryRunner ? onRunner(manager.queryRunner, text, values) : onDataSource(manager.connection, text, values),
  };
}

/**
 * The {@link TransactionScope} of `dataSource` (the same one on every call), over
 * `dataSource.transaction`: inside `scope.run(async (manager) => ...)`, `Queue` and `Admin`
 * given `transaction: scope` in `WorkhorseModule.forRoot` join the transaction of `manager`
 * without a client argument.
 *
 * @example
 * const transactions = typeormTransactionScope(dataSource);
 * await transactions.run(async (manager) => {
 *   await manager.insert(OrderEntity, { id });
 *   await queue.enqueue('order.fulfill', { id });
 * });
 */
export function typeormTransactionScope(dataSource: DataSource): TransactionScope<EntityManager> {
  return scopeOf(dataSource, () => new TransactionScope<EntityManager>((fn) => dataSource.transaction(fn), fromTypeOrm));
}
