/**
 * nestjs-workhorse/drizzle: enqueue and administer jobs inside Drizzle transactions, with
 * Drizzle's node-postgres driver (`drizzle-orm/node-postgres`). Needs the `drizzle-orm` package.
 *
 * @example
 * import { fromDrizzle } from 'nestjs-workhorse/drizzle';
 * await db.transaction(async (tx) => {
 *   await tx.insert(orders).values({ id, amountCents });
 *   await queue.enqueue('order.fulfill', { id }, {}, fromDrizzle(tx));
 * });
 */
import { sql, type SQL } from 'drizzle-orm';
import { types, type QueryResult } from 'pg';
import { scopeOf, TransactionScope } from '../core/transaction-scope';
import type { Queryable } from '../core/types';

/**
 * A Drizzle database or transaction on the node-postgres driver: what `drizzle(pool)` returns,
 * or the `tx` that `db.transaction` passes to its callback.
 *
 * Its `execute` is matched by its result only: in an ESM application, the application's
 * `drizzle-orm` is its ES module build and this package's (which `require`s it) its CommonJS
 * build, whose `SQL` types TypeScript tells apart (they have private members). Drizzle itself
 * accepts a statement built by either copy: it recognises its objects by their entity kind.
 */
export interface DrizzleNodePgClient {
  execute(query: never): PromiseLike<QueryResult>;
}

/** A Drizzle database that opens transactions (what {@link drizzleTransactionScope} needs). */
export interface DrizzleNodePgDatabase<Tx extends DrizzleNodePgClient> {
  transaction<R>(fn: (tx: Tx) => Promise<R>): Promise<R>;
}

// Drizzle's node-postgres driver hands these types over as the server's text (its column
// mappers parse them); Queue and Admin read rows as node-postgres parses them.
const TEXT_KEPT_BY_DRIZZLE = new Set([
  types.builtins.TIMESTAMPTZ,
  types.builtins.TIMESTAMP,
  types.builtins.DATE,
  types.builtins.INTERVAL,
  1115, // timestamp[]
  1182, // date[]
  1185, // timestamptz[]
  1187, // interval[]
  1231, // numeric[]
]);

function asNodePostgresRows(result: QueryResult): unknown[] {
  const reparse = result.fields.filter((field) => TEXT_KEPT_BY_DRIZZLE.has(field.dataTypeID));
  if (reparse.length === 0) return result.rows;
  return result.rows.map((row: Record<string, unknown>) => {
    const converted = { ...row };
    for (const field of reparse) {
      const value = converted[field.name];
      if (typeof value === 'string') converted[field.name] = types.getTypeParser(field.dataTypeID, 'text')(value);
    }
    return converted;
  });
}

/** The statement as Drizzle SQL: each `$n` becomes a bound parameter (never text in the query). */
function toDrizzleSql(text: string, values: unknown[]): SQL {
  const chunks: SQL[] = [];
  let from = 0;
  for (const match of text.matchAll(/\$(\d+)/g)) {
    chunks.push(sql.raw(text.slice(from, match.index)));
    chunks.push(sql`${sql.param(values[Number(match[1]) - 1])}`);
    from = match.index + match[0].length;
  }
  chunks.push(sql.raw(text.slice(from)));
  return sql.join(chunks);
}

/**
 * Turns a Drizzle node-postgres database, or the `tx` of `db.transaction`, into what `Queue`
 * and `Admin` accept as their client argument. Given `tx` the job joins that transaction;
 * given the database each call runs on its own. Rows come back as node-postgres parses them,
 * and a failed statement raises node-postgres's error (the `cause` of Drizzle's
 * `DrizzleQueryError`), so invalid input and idempotency conflicts still raise this package's
 * typed errors.
 *
 * @example
 * await db.transaction(async (tx) => {
 *   await tx.insert(orders).values({ id, amountCents });
 *   await queue.enqueue('order.fulfill', { id }, {}, fromDrizzle(tx));
 * });
 */
export function fromDrizzle(client: DrizzleNodePgClient): Queryable {
  return {
    async query(text, values = []) {
      let result: QueryResult;
      try {
        result = await client.execute(toDrizzleSql(text, values) as never);
      } catch (error) {
        const cause = (error as { cause?: { code?: unknown } }).cause;
        throw typeof cause?.code === 'string' ? cause : error;
      }
      return { rows: asNodePostgresRows(result) };
    },
  };
}

/**
 * The {@link TransactionScope} of `db` (the same one on every call), over `db.transaction`:
 * inside `scope.run(async (tx) => ...)`, `Queue` and `Admin` given `transaction: scope` in
 * `WorkhorseModule.forRoot` join the transaction of `tx` without a client argument.
 *
 * @example
 * const transactions = drizzleTransactionScope(db);
 * await transactions.run(async (tx) => {
 *   await tx.insert(orders).values({ id, amountCents });
 *   await queue.enqueue('order.fulfill', { id });
 * });
 */
export function drizzleTransactionScope<Tx extends DrizzleNodePgClient>(db: DrizzleNodePgDatabase<Tx>): TransactionScope<Tx> {
  return scopeOf(db, () => new TransactionScope<Tx>((fn) => db.transaction(fn), fromDrizzle));
}
