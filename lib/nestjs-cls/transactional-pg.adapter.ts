import type { TransactionalAdapter, TransactionalAdapterOptions } from '@nestjs-cls/transactional';
import type { InjectionToken } from '@nestjs/common';
import type { Pool, PoolClient } from 'pg';
import { CheckedOutClient } from '../core/checked-out-client';

/** Options of one transaction: `@Transactional({ isolationLevel: 'serializable' })`. */
export interface PgTransactionOptions {
  /** Default: the server's (normally `read committed`). */
  isolationLevel?: 'read committed' | 'repeatable read' | 'serializable';
  readOnly?: boolean;
}

/** Settings of {@link TransactionalAdapterPg}. */
export interface PgTransactionalAdapterOptions {
  /** The injection token of your `pg` `Pool` (e.g. the `Pool` class, or a symbol). */
  poolToken: InjectionToken;
  /** Options of every transaction, merged under those that `@Transactional(...)` gives. */
  defaultTxOptions?: Partial<PgTransactionOptions>;
}

/** Outside a transaction `txHost.tx` is the pool; inside one, the transaction's client. */
export type PgTransaction = Pool | PoolClient;

const ISOLATION_LEVELS = new Set(['read committed', 'repeatable read', 'serializable']);

function beginStatement(options: Partial<PgTransactionOptions> | undefined): string {
  let statement = 'BEGIN';
  const level = options?.isolationLevel;
  if (level !== undefined) {
    if (!ISOLATION_LEVELS.has(level)) throw new TypeError(`isolationLevel must be one of ${[...ISOLATION_LEVELS].join(', ')}, got ${String(level)}`);
    statement += ` ISOLATION LEVEL ${level.toUpperCase()}`;
  }
  if (options?.readOnly) statement += ' READ ONLY';
  return statement;
}

let savepoints = 0;

/**
 * A node-postgres adapter for `@nestjs-cls/transactional` (which ships adapters for ORMs but
 * none for `pg`): a method with its `@Transactional()` runs in a transaction on one client of
 * your pool, `txHost.tx` is that client (the pool outside a transaction), and with
 * `Propagation.Nested` an inner method gets a savepoint. Give the module
 * `transaction: clsTransactionSource(txHost)` and the injected `Queue` and `Admin` join it.
 *
 * @example
 * ClsModule.forRoot({
 *   global: true,
 *   plugins: [
 *     new ClsPluginTransactional({
 *       imports: [DatabaseModule], // exports the Pool provider
 *       adapter: new TransactionalAdapterPg({ poolToken: Pool }),
 *     }),
 *   ],
 * });
 */
export class TransactionalAdapterPg implements TransactionalAdapter<Pool, PgTransaction, PgTransactionOptions> {
  readonly connectionToken: InjectionToken;
  readonly defaultTxOptions?: Partial<PgTransactionOptions>;

  constructor(options: PgTransactionalAdapterOptions) {
    this.connectionToken = options.poolToken;
    this.defaultTxOptions = options.defaultTxOptions;
  }

  optionsFactory = (pool: Pool): TransactionalAdapterOptions<PgTransaction, PgTransactionOptions> => ({
    wrapWithTransaction: async (options, fn, setClient) => {
      const statement = beginStatement(options);
      // Listened to while checked out: a connection that breaks fails the next query and is then
      // destroyed instead of returned; it never ends the process.
      const checkedOut = await CheckedOutClient.take(pool);
      const { client } = checkedOut;
      let broken: Error | undefined;
      try {
        await client.query(statement);
        setClient(client);
        const result: unknown = await fn();
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: Error) => {
          broken = rollbackError;
        });
        throw error;
      } finally {
        checkedOut.release(broken);
      }
    },
    wrapWithNestedTransaction: async (_options, fn, setClient, client) => {
      const savepoint = `workhorse_cls_${++savepoints}`;
      await client.query(`SAVEPOINT ${savepoint}`);
      setClient(client);
      try {
        const result: unknown = await fn();
        await client.query(`RELEASE SAVEPOINT ${savepoint}`);
        return result;
      } catch (error) {
        await client.query(`ROLLBACK TO SAVEPOINT ${savepoint}`);
        throw error;
      }
    },
    getFallbackInstance: () => pool,
  });
}
