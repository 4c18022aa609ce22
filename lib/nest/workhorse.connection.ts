import { Logger } from '@nestjs/common';
import { Pool } from 'pg';
import { CheckedOutClient } from '../core/checked-out-client';
import { applyConnectTimeout, DEFAULT_CONNECT_TIMEOUT_MS } from '../core/connect-timeout';
import { Admin } from '../core/admin';
import { BEGIN, COMMIT, ROLLBACK } from '../core/protocol/session';
import { ConnectTimeoutError, SchemaMigrationError, SchemaNotInstalledError, SchemaVersionMismatchError } from '../core/errors';
import { installSchema, verifySchema } from '../core/schema';
import type { QueuePolicy } from '../core/types';
import { WorkhorseConfigurationError } from './workhorse-configuration.error';
import { validateModuleOptions } from './workhorse-options.validator';
import { messages } from './workhorse.messages';

/**
 * The module's database connection: the pool (created from `connectionString`, or the one the
 * options gave), whether the module owns it, and the schema check that gates start-up. Created
 * by an async provider, so nothing that injects it runs before the schema is in place.
 */
export class WorkhorseConnection {
  private static readonly logger = new Logger('Workhorse');
  private closing: Promise<void> | null = null;

  private constructor(
    readonly pool: Pool,
    /** True when the module created the pool and so must close it. */
    readonly owned: boolean,
  ) {}

  /**
   * Validates the options, creates the pool if needed, installs or verifies the schema and sets
   * the policies of the `queues` option. On
   * any failure a pool it created is closed again before the error is thrown, so a refused
   * start-up leaves nothing open.
   */
  static async open(rawOptions: unknown): Promise<WorkhorseConnection> {
    const options = validateModuleOptions(rawOptions);
    const owned = options.pool === undefined;
    // A database that accepts connections and never answers must not hang start-up: the pool gets
    // a connect timeout unless its settings name one.
    const pool = applyConnectTimeout(
      options.pool ??
        new Pool({ connectionTimeoutMillis: DEFAULT_CONNECT_TIMEOUT_MS, ...options.poolConfig, connectionString: options.connectionString }),
    );
    if (owned) {
      // An idle client whose connection breaks makes the pool emit `error`; unheard, it kills the process.
      pool.on('error', (error: Error) => WorkhorseConnection.logger.warn(`Idle database connection failed: ${error.message}`));
    }
    const connection = new WorkhorseConnection(pool, owned);
    try {
      await prepareSchema(pool, options.schema ?? 'install', WorkhorseConnection.logger);
      await applyQueuePolicies(pool, options.queues ?? {});
    } catch (error) {
      await connection.close();
      throw error;
    }
    return connection;
  }

  /** Closes the pool if the module created it; a pool given in the options stays open. */
  close(): Promise<void> {
    if (!this.owned) return Promise.resolve();
    this.closing ??= this.pool.end();
    return this.closing;
  }
}

async function prepareSchema(pool: Pool, mode: 'install' | 'verify', logger: Logger): Promise<void> {
  try {
    if (mode === 'install') {
      const { created, from, to, applied } = await installSchema(pool);
      if (created) logger.log(messages.schemaInstalled(to));
      else if (from !== null && applied.length > 0) logger.log(messages.schemaMigrated(from, to, applied));
    } else {
      await verifySchema(pool);
    }
  } catch (error) {
    // Typed and self-explanatory already (which host, how long, what to check).
    if (error instanceof ConnectTimeoutError) throw error;
    if (error instanceof SchemaNotInstalledError) throw new WorkhorseConfigurationError(messages.schemaNotInstalled(error.message));
    if (error instanceof SchemaVersionMismatchError || error instanceof SchemaMigrationError) {
      throw new WorkhorseConfigurationError(messages.schemaMismatch(mode, error.message));
    }
    const detail = error instanceof Error ? error.message : String(error);
    throw new WorkhorseConfigurationError(messages.schemaUnreachable(mode, detail));
  }
}

/** The `queues` option, in one transaction: each named queue gets exactly its policy. */
async function applyQueuePolicies(pool: Pool, queues: Record<string, QueuePolicy>): Promise<void> {
  const entries = Object.entries(queues);
  if (entries.length === 0) return;
  const checkedOut = await CheckedOutClient.take(pool);
  const { client } = checkedOut;
  try {
    await client.query(BEGIN);
    const admin = new Admin(pool);
    for (const [queue, policy] of entries) await admin.setQueuePolicy(queue, policy, { actor: 'WorkhorseModule.forRoot' }, client);
    await client.query(COMMIT);
  } catch (error) {
    await client.query(ROLLBACK).catch(() => undefined);
    throw new WorkhorseConfigurationError(messages.queuePoliciesFailed(error instanceof Error ? error.message : String(error)));
  } finally {
    checkedOut.release();
  }
}
