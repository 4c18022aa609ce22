import { AsyncLocalStorage } from 'node:async_hooks';
import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import { Observable } from 'rxjs';
import { CheckedOutClient } from '../core/checked-out-client';
import { BEGIN, COMMIT, ROLLBACK } from '../core/protocol/session';
import type { TransactionSource } from '../core/transaction-scope';
import type { Queryable } from '../core/types';
import { WorkhorseTransactionError } from './workhorse-transaction.error';
import { messages } from './workhorse.messages';

/**
 * One transaction of a host. The connection is taken at the first query, not when the
 * transaction starts, so a request or method that never touches the database costs no
 * connection. A transaction bound to a client the caller manages (a transactional job handler's
 * `ctx.client`) never commits, rolls back or releases it.
 */
class Transaction {
  private connecting: Promise<PoolClient> | null;
  private ended = false;
  /** The connection taken from the pool (null for a bound client, or before the first query). */
  private checkedOut: CheckedOutClient | null = null;
  /** What `host.client` hands out: queries through this transaction, nothing else. */
  readonly queryable: Queryable;

  constructor(
    readonly host: WorkhorseTransactionHost,
    /** The pool to take a connection from, or null for a bound client. */
    private readonly pool: Pool | null,
    bound?: PoolClient,
  ) {
    this.connecting = bound ? Promise.resolve(bound) : null;
    this.queryable = { query: (text, values) => this.query(text, values) };
  }

  get isOpen(): boolean {
    return !this.ended;
  }

  connection(): Promise<PoolClient> {
    if (this.ended) return Promise.reject(new WorkhorseTransactionError(messages.transactionEnded()));
    this.connecting ??= this.begin(this.pool as Pool);
    return this.connecting;
  }

  async query<R extends QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>> {
    const client = await this.connection();
    const lost = this.lost();
    if (lost) throw lost;
    return client.query<R>(text, values);
  }

  /** The error to give once the connection broke (terminated backend, server restart): its writes are gone. */
  private lost(): WorkhorseTransactionError | null {
    const broken = this.checkedOut?.broken;
    return broken ? new WorkhorseTransactionError(messages.transactionConnectionLost(broken.message), { cause: broken }) : null;
  }

  /** Commits or rolls back (if a connection was taken) and releases the connection; once. */
  async end(commit: boolean): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    if (this.pool === null || this.connecting === null) return;
    let client: PoolClient;
    try {
      client = await this.connecting;
    } catch {
      return; // BEGIN never succeeded: there is nothing to end, and its error already reached the caller.
    }
    let result: QueryResult | null = null;
    let failure: Error | null = this.lost();
    if (!failure) {
      try {
        result = await client.query(commit ? COMMIT : ROLLBACK);
      } catch (error) {
        failure = error as Error;
      }
    }
    // A connection that failed is destroyed rather than returned to the pool.
    this.checkedOut?.release(failure ?? undefined);
    if (!commit) return;
    if (failure) throw failure;
    // PostgreSQL answers COMMIT in an aborted transaction with a rollback, not an error.
    if (result?.command === ROLLBACK) throw new WorkhorseTransactionError(messages.commitRolledBack());
  }

  /** Marks a bound transaction as over, so late queries fail instead of using a client that moved on. */
  close(): void {
    this.ended = true;
  }

  private async begin(pool: Pool): Promise<PoolClient> {
    // Listened to while checked out: a connection that breaks between queries fails the next
    // query and the commit (never the process), and is destroyed rather than returned.
    const checkedOut = await CheckedOutClient.take(pool);
    try {
      await checkedOut.client.query(BEGIN);
    } catch (error) {
      checkedOut.release(error as Error);
      throw error;
    }
    this.checkedOut = checkedOut;
    return checkedOut.client;
  }
}

// One store for the whole library: a `@Transactional()` method on an object the explorer could not
// reach (request-scoped, transient) still joins the transaction its caller runs in.
const storage = new AsyncLocalStorage<Transaction>();

/** True when this async context carries a transaction context (open or closed) that `outside` would leave. */
export function inTransactionContext(): boolean {
  return storage.getStore() !== undefined;
}

/** The host of the transaction active in this async context, if any (for `@Transactional()`). */
export function activeTransactionHost(): WorkhorseTransactionHost | undefined {
  const tx = storage.getStore();
  return tx?.isOpen ? tx.host : undefined;
}

/**
 * Carries the current database transaction through async calls (on `AsyncLocalStorage`, so
 * every provider stays a singleton). Inside `run(fn)`, `Queue.enqueue`, `Admin` calls and
 * `query()` with no explicit client all use the same transaction, which commits when `fn`
 * resolves and rolls back when it throws; outside any transaction they use the pool. Nested
 * `run` calls join the outer transaction. An explicit client argument always wins.
 *
 * @example
 * @Injectable()
 * export class OrderService {
 *   constructor(private readonly tx: WorkhorseTransactionHost, private readonly queue: Queue) {}
 *
 *   placeOrder(id: string) {
 *     return this.tx.run(async () => {
 *       await this.tx.query('INSERT INTO orders (id) VALUES ($1)', [id]);
 *       await this.queue.enqueue('order.fulfill', { id }); // same transaction
 *     });
 *   }
 * }
 */
export class WorkhorseTransactionHost {
  constructor(
    /** The pool that transactions take their connection from, and that queries use outside one. */
    readonly pool: Pool,
    /** The module's `transaction` option: an ORM's current transaction, which `client` prefers. */
    private readonly orm?: TransactionSource,
  ) {}

  /** True inside `run` (or a transactional job handler) of this host. */
  get isActive(): boolean {
    return this.current() !== undefined;
  }

  /**
   * The current transaction as a `Queryable` (pass it wherever a client is taken, e.g. a core
   * `Queue`), or undefined outside a transaction: the ORM's, when the module's `transaction`
   * option reports one, else this host's own (whose connection is taken at its first query).
   * The injected `Queue` and `Admin` use it when the caller passes no client.
   */
  get client(): Queryable | undefined {
    return this.orm?.current() ?? this.current()?.queryable;
  }

  /**
   * The current transaction's pg `PoolClient` (taking the connection and sending `BEGIN` now if
   * that has not happened yet), or undefined outside a transaction. For libraries that need a
   * real client; do not commit, roll back or release it yourself.
   */
  async getPoolClient(): Promise<PoolClient | undefined> {
    return this.current()?.connection();
  }

  /** Runs a query in the current transaction, or on the pool outside one. */
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>> {
    const tx = this.current();
    return tx ? tx.query<R>(text, values) : this.pool.query<R>(text, values);
  }

  /**
   * Runs `fn` in a transaction: joins the current one, or starts one that commits when `fn`
   * resolves and rolls back (and rethrows) when it throws. A failed commit rejects.
   */
  async run<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.current()) return fn();
    const tx = new Transaction(this, this.pool);
    let result: T;
    try {
      result = await storage.run(tx, fn);
    } catch (error) {
      await tx.end(false);
      throw error;
    }
    await tx.end(true);
    return result;
  }

  /**
   * Runs `fn` with `client` (a transaction you manage) as the current transaction: queries,
   * `enqueue` and `Admin` calls inside use it. Nothing is committed, rolled back or released.
   */
  async runWith<T>(client: PoolClient, fn: () => T | Promise<T>): Promise<T> {
    const tx = new Transaction(this, null, client);
    try {
      return await storage.run(tx, fn);
    } finally {
      tx.close();
    }
  }

  /**
   * Runs an Observable-returning `factory` in a transaction (for interceptors): the factory is
   * called and its Observable subscribed inside the transaction, emissions are held back until
   * the commit succeeded (so a failed commit becomes an error), and an error or an early
   * unsubscribe rolls back. Inside a transaction of this host it simply joins.
   */
  observe<T>(factory: () => Observable<T>): Observable<T> {
    return new Observable<T>((subscriber) => {
      if (this.current()) return factory().subscribe(subscriber);
      const tx = new Transaction(this, this.pool);
      const values: T[] = [];
      const inner = storage.run(tx, () =>
        factory().subscribe({
          next: (value) => values.push(value),
          error: (error: unknown) => {
            void tx.end(false).then(() => subscriber.error(error));
          },
          complete: () => {
            tx.end(true).then(
              () => {
                for (const value of values) subscriber.next(value);
                subscriber.complete();
              },
              (error: unknown) => subscriber.error(error),
            );
          },
        }),
      );
      return () => {
        inner.unsubscribe();
        void tx.end(false);
      };
    });
  }

  /** Runs `fn` outside any transaction, whatever the caller's context. */
  outside<T>(fn: () => T): T {
    return inTransactionContext() ? storage.exit(fn) : fn();
  }

  private current(): Transaction | undefined {
    const tx = storage.getStore();
    return tx?.host === this && tx.isOpen ? tx : undefined;
  }
}
