/**
 * nestjs-workhorse/prisma: enqueue and administer jobs inside Prisma transactions. Works with
 * a generated Prisma 7 Client on PostgreSQL (through its driver adapter, e.g.
 * `@prisma/adapter-pg`); this package loads nothing of Prisma itself.
 *
 * @example
 * import { fromPrisma } from 'nestjs-workhorse/prisma';
 * await prisma.$transaction(async (tx) => {
 *   await tx.order.create({ data: { id, amountCents } });
 *   await queue.enqueue('order.fulfill', { id }, {}, fromPrisma(tx));
 * });
 */
import { scopeOf, TransactionScope } from '../core/transaction-scope';
import type { Queryable } from '../core/types';

/**
 * The part of a Prisma Client, or of the client an interactive `$transaction` passes to its
 * callback, that this entry point uses.
 */
export interface PrismaRawClient {
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>;
}

/** A Prisma Client that opens interactive transactions (what {@link prismaTransactionScope} needs). */
export interface PrismaTransactionalClient<Tx extends PrismaRawClient> {
  $transaction<R>(fn: (tx: Tx) => Promise<R>): Promise<R>;
}

// Prisma decodes int8 as BigInt; node-postgres (whose rows Queue and Admin read) gives it as a
// decimal string. Dates, JSON, text and arrays of them come back the same from both, and no
// protocol function returns numeric.
function asNodePostgresValue(value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return value.map(asNodePostgresValue);
  return value;
}

function asNodePostgresRow(row: unknown): unknown {
  if (typeof row !== 'object' || row === null) return row;
  const converted: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) converted[key] = asNodePostgresValue(value);
  return converted;
}

// A failed raw query surfaces as PrismaClientKnownRequestError P2010, with the server's error
// (SQLSTATE, message, column, detail) in `meta.driverAdapterError.cause`.
function asPostgresError(error: unknown): unknown {
  const cause = (error as { meta?: { driverAdapterError?: { cause?: PgLikeCause } } })?.meta?.driverAdapterError?.cause;
  const code = cause?.originalCode;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return error;
  return Object.assign(new Error(cause?.originalMessage ?? (error as Error).message), {
    code,
    column: cause?.column,
    detail: cause?.detail,
    cause: error,
  });
}

interface PgLikeCause {
  originalCode?: string;
  originalMessage?: string;
  column?: string;
  detail?: string;
}

/**
 * Turns a Prisma Client, or the transaction client of an interactive `$transaction`, into what
 * `Queue` and `Admin` accept as their client argument. Given the transaction client the job
 * joins that transaction; given the client itself each call runs on its own. Queries go through
 * `$queryRawUnsafe` with `$n` parameters, and rows come back as node-postgres would give them
 * (int8 as strings); database errors keep PostgreSQL's SQLSTATE, so invalid input and
 * idempotency conflicts still raise this package's typed errors.
 *
 * @example
 * await prisma.$transaction(async (tx) => {
 *   await tx.order.create({ data: { id, amountCents } });
 *   await queue.enqueue('order.fulfill', { id }, {}, fromPrisma(tx));
 * });
 */
export function fromPrisma(client: PrismaRawClient): Queryable {
  return {
    async query(text, values = []) {
      let rows: unknown;
      try {
        rows = await client.$queryRawUnsafe(text, ...values);
      } catch (error) {
        throw asPostgresError(error);
      }
      return { rows: (rows as unknown[]).map(asNodePostgresRow) };
    },
  };
}

/**
 * The {@link TransactionScope} of `prisma` (the same one on every call), over Prisma's
 * interactive `$transaction` with Prisma's default options: inside `scope.run(async (tx) =>
 * ...)`, `Queue` and `Admin` given `transaction: scope` in `WorkhorseModule.forRoot` join the
 * transaction of `tx` without a client argument. For other transaction options (a longer
 * `timeout`, an isolation level), build a scope of your own:
 * `new TransactionScope((fn) => prisma.$transaction(fn, { timeout: 15_000 }), fromPrisma)`.
 *
 * @example
 * const transactions = prismaTransactionScope(prisma);
 * await transactions.run(async (tx) => {
 *   await tx.order.create({ data: { id, amountCents } });
 *   await queue.enqueue('order.fulfill', { id });
 * });
 */
export function prismaTransactionScope<Tx extends PrismaRawClient>(prisma: PrismaTransactionalClient<Tx>): TransactionScope<Tx> {
  return scopeOf(prisma, () => new TransactionScope<Tx>((fn) => prisma.$transaction(fn), fromPrisma));
}
