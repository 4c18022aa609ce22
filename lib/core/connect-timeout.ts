import type { ClientConfig, Pool } from 'pg';
import { ConnectTimeoutError } from './errors';

/**
 * How long getting a database connection may take, in milliseconds, when the pool does not say
 * (`connectionTimeoutMillis` unset or 0, which in node-postgres means "wait forever"). It is
 * node-postgres' own setting, so it bounds both opening a new connection and waiting for a free
 * one of a full pool. A server that accepts the TCP connection and never answers (a wrong port, a
 * stalled proxy, a firewall that swallows packets) would otherwise hang start-up, and every call
 * after it, for good.
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * Gives a pool without a connect timeout the default one. node-postgres reads the setting each
 * time it opens a connection, so it applies from the next connection on; a pool that has its own
 * `connectionTimeoutMillis` is left as it is. Every workhorse client calls it on the pool it is
 * given (and the worker's own connections copy the pool's settings).
 */
export function applyConnectTimeout(pool: Pool): Pool {
  const options = pool.options as { connectionTimeoutMillis?: number } | undefined;
  if (options && !(typeof options.connectionTimeoutMillis === 'number' && options.connectionTimeoutMillis > 0)) {
    options.connectionTimeoutMillis = DEFAULT_CONNECT_TIMEOUT_MS;
  }
  return pool;
}

/** The connect timeout a pool applies (after {@link applyConnectTimeout}). */
function connectTimeoutOf(pool: Pool): number {
  const value = (pool.options as { connectionTimeoutMillis?: number } | undefined)?.connectionTimeoutMillis;
  return typeof value === 'number' && value > 0 ? value : DEFAULT_CONNECT_TIMEOUT_MS;
}

// node-postgres' own words when its connect timer fires: the pool's while it opens a connection,
// a client's (whose socket it destroys), and the pool's while a caller waits for a free connection.
const CONNECT_MESSAGES = ['Connection terminated due to connection timeout', 'timeout expired'];
const POOL_MESSAGE = 'timeout exceeded when trying to connect';

/**
 * Whether `error` is node-postgres giving up on a connection in time: `'connect'` (opening one),
 * `'pool'` (waiting for a free one of a full pool), or null for any other error.
 */
function connectTimeoutKind(error: unknown): 'connect' | 'pool' | null {
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message !== 'string') return null;
  if (CONNECT_MESSAGES.includes(message)) return 'connect';
  return message === POOL_MESSAGE ? 'pool' : null;
}

/** `host:port/database` of a pool's settings, never the user or password, for messages. */
function connectTarget(pool: Pool): string {
  const config = (pool.options ?? {}) as ClientConfig;
  let host = config.host;
  let port = config.port === undefined ? undefined : String(config.port);
  let database = config.database;
  if (config.connectionString) {
    try {
      const url = new URL(config.connectionString);
      host = url.hostname || url.searchParams.get('host') || host;
      port = url.port || port;
      database = decodeURIComponent(url.pathname.slice(1)) || database;
    } catch {
      // A libpq keyword string or a socket path: say no more than the settings above.
    }
  }
  const where = `${host || process.env.PGHOST || 'localhost'}:${port || process.env.PGPORT || '5432'}`;
  return database ? `${where}/${database}` : where;
}

/** A {@link ConnectTimeoutError} (naming the pool's target and timeout) for node-postgres giving up on a connection; any other error unchanged. */
export function fromConnectTimeout(error: unknown, pool: Pool): unknown {
  const waited = connectTimeoutKind(error);
  return waited ? new ConnectTimeoutError(connectTarget(pool), connectTimeoutOf(pool), waited, { cause: error }) : error;
}
