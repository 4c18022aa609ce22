import { AsyncLocalStorage } from 'node:async_hooks';
import type { Queryable } from './types';

/**
 * Tells which database transaction is current in this async context, as a `Queryable`, or
 * undefined outside one. Give one as the `transaction` option of `WorkhorseModule.forRoot` and
 * the injected `Queue` and `Admin` join that transaction when the caller passes no client.
 * A {@link TransactionScope} is one; `clsTransactionSource` (from `nestjs-workhorse/nestjs-cls`)
 * is another.
 *
 * @example
 * const source: TransactionSource = { current: () => myAls.getStore()?.client };
 */
export interface TransactionSource {
  current(): Queryable | undefined;
}

/**
 * Carries an ORM's transaction through async calls: `run(fn)` opens a transaction with the ORM
 * (TypeORM's `dataSource.transaction`, Prisma's `$transaction`, ...) and makes it current while
 * `fn` runs; a `run` inside another joins it. ORMs pass their transaction to the callback only,
 * so code further down (an injected `Queue`) cannot see it; this scope lets it. Get one from
 * your ORM's entry point (`typeormTransactionScope(dataSource)`, `prismaTransactionScope(prisma)`,
 * `drizzleTransactionScope(db)`, `kyselyTransactionScope(db)`): each gives the one scope of that
 * connection, so the module option and your services share it without wiring.
 *
 * @example
 * const transactions = typeormTransactionScope(dataSource);
 * await transactions.run(async (manager) => {
 *   await manager.insert(OrderEntity, { id });
 *   await queue.enqueue('order.fulfill', { id }); // with `transaction: transactions` in forRoot
 * });
 */
export class TransactionScope<Tx> implements TransactionSource {
  private readonly storage = new AsyncLocalStorage<Tx>();

  constructor(
    /** Opens a transaction with the ORM, calls `fn` with it, commits when `fn` resolves and rolls back when it throws. */
    private readonly begin: <R>(fn: (tx: Tx) => Promise<R>) => Promise<R>,
    /** Turns the ORM's transaction into what `Queue` and `Admin` accept. */
    private readonly toQueryable: (tx: Tx) => Queryable,
  ) {}

  /** The current transaction of this scope, or undefined outside one. */
  get tx(): Tx | undefined {
    return this.storage.getStore();
  }

  /** The current transaction as a `Queryable`, or undefined outside one. */
  current(): Queryable | undefined {
    const tx = this.storage.getStore();
    return tx === undefined ? undefined : this.toQueryable(tx);
  }

  /**
   * Runs `fn` in a transaction of the ORM: joins the current one of this scope, or opens one
   * that commits when `fn` resolves and rolls back (rethrowing) when it throws.
   */
  run<R>(fn: (tx: Tx) => Promise<R>): Promise<R> {
    const active = this.storage.getStore();
    if (active !== undefined) return fn(active);
    return this.begin((tx) => this.storage.run(tx, () => fn(tx)));
  }

  /**
   * Makes `tx`, a transaction you opened with the ORM yourself, the current one while `fn`
   * runs. Nothing is committed or rolled back here: the ORM's own callback does that.
   */
  runWith<R>(tx: Tx, fn: () => Promise<R>): Promise<R> {
    return this.storage.run(tx, fn);
  }
}

const scopes = new WeakMap<object, TransactionScope<unknown>>();

/** The one scope of `connection` (an ORM's DataSource, client or database), created on first use. */
export function scopeOf<Tx>(connection: object, create: () => TransactionScope<Tx>): TransactionScope<Tx> {
  let scope = scopes.get(connection) as TransactionScope<Tx> | undefined;
  if (scope === undefined) {
    scope = create();
    scopes.set(connection, scope as TransactionScope<unknown>);
  }
  return scope;
}
