/**
 * The CLI's connection to PostgreSQL: one small pool per run, and plain words for the ways
 * connecting can fail. The URL itself is never printed, because it usually holds a password.
 */
import { Client, Pool } from 'pg';
import { DEFAULT_CONNECT_TIMEOUT_MS } from '../core/connect-timeout';
import { ConnectTimeoutError } from '../core/errors';
import { CliUsageError } from './cli.errors';
import { messages } from './cli.messages';

/** A person at a terminal would rather read an error than wait on an unreachable host. */
export const CONNECT_TIMEOUT_MS = DEFAULT_CONNECT_TIMEOUT_MS;

/**
 * A pool for one command: two connections are plenty for a CLI that runs one query at a time.
 * It shows up as `workhorse-cli` in `pg_stat_activity` unless the URL names an
 * `application_name` of its own.
 */
export function openPool(url: string): Pool {
  const pool = new Pool({
    connectionString: url,
    max: 2,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: 'workhorse-cli',
  });
  // A connection that breaks while idle must not crash the process; the next query reports it.
  pool.on('error', () => undefined);
  return pool;
}

// What node-postgres makes of a connection string (host, or socket directory, port, database):
// its own parser, so every form it accepts is accepted here too (`postgres://u@/db?host=/run/pg`,
// a percent-encoded socket directory as host, spaces, `socket:`, `/dir db`). Creating a Client
// opens nothing.
function parseTarget(url: string): { host: string; port: number; database: string | undefined } | null {
  try {
    const { host, port, database } = new Client({ connectionString: url });
    return { host, port, database };
  } catch {
    return null;
  }
}

/**
 * Refuses what is not a PostgreSQL connection string (a typo, another database's URL, a
 * `host:port` without a scheme), so it is a usage error instead of a confusing connection
 * failure: the scheme must be `postgres:`, `postgresql:` or `socket:` (or the string a socket
 * directory), and node-postgres must be able to read it. `source` names where the URL came from.
 */
export function checkDatabaseUrl(url: string, source: string): void {
  if (!/^(\/|(postgres|postgresql|socket):)/i.test(url) || parseTarget(url) === null) {
    throw new CliUsageError(messages.badDatabaseUrl(source));
  }
}

/** `host:port/database` (or the socket directory) of a connection URL, without user or password, for messages. */
export function describeTarget(url: string): string {
  const target = parseTarget(url);
  if (target === null) return 'the database in the given URL';
  const database = target.database ? `/${target.database}` : '';
  if (target.host.startsWith('/')) return `the socket in ${target.host} (port ${target.port})${database ? `, database ${target.database}` : ''}`;
  return `${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}${database}`;
}

interface ErrorWithCode {
  code?: unknown;
  message: string;
  errors?: unknown;
}

// Duck-typed rather than `instanceof Error`: errors raised inside Node's own modules come from
// another realm when the CLI runs in a sandbox such as a Jest test.
function asError(error: unknown): ErrorWithCode | null {
  if (typeof error !== 'object' || error === null) return null;
  const candidate = error as { message?: unknown };
  return typeof candidate.message === 'string' ? (error as ErrorWithCode) : null;
}

/** The driver's or server's error code; for an `AggregateError` (several addresses), the first. */
function errorCode(error: ErrorWithCode): string | undefined {
  if (typeof error.code === 'string') return error.code;
  if (Array.isArray(error.errors)) {
    const first = error.errors[0] as ErrorWithCode | undefined;
    if (first && typeof first.code === 'string') return first.code;
  }
  return undefined;
}

/** The message of anything error-like, else its text. */
export function messageOf(error: unknown): string {
  const e = asError(error);
  return e === null ? String(error) : e.message || String(errorCode(e) ?? 'unknown error');
}

/** The PostgreSQL error code of `error`, when the server raised it. */
export function sqlState(error: unknown): string | undefined {
  const e = asError(error);
  if (e === null) return undefined;
  const code = errorCode(e);
  return code !== undefined && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * A sentence for a failure to reach or use the database, or null when `error` is not one
 * (a bug, or one of our own errors).
 */
export function describeDatabaseError(error: unknown, target: string): string | null {
  if (error instanceof ConnectTimeoutError) return messages.connectionTimeout(target, error.timeoutMs / 1000);
  const e = asError(error);
  if (e === null) return null;
  const code = errorCode(e);
  const reason = e.message || code || 'unknown reason';
  switch (code) {
    case 'ECONNREFUSED':
      return messages.connectionRefused(target);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return messages.hostNotFound(target);
    case 'ETIMEDOUT':
      return messages.connectionTimeout(target, CONNECT_TIMEOUT_MS / 1000);
    case 'ECONNRESET':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'EPIPE':
    case 'ENOENT':
    case 'EACCES':
      return messages.connectionFailed(target, reason);
  }
  if (/connection timeout|timeout exceeded when trying to connect/i.test(e.message)) {
    return messages.connectionTimeout(target, CONNECT_TIMEOUT_MS / 1000);
  }
  if (/^Connection terminated/i.test(e.message)) return messages.connectionFailed(target, reason);
  const state = sqlState(e);
  if (state === undefined) return null;
  // Classes 08 (connection), 28 (authorization) and 3D (no such database) are failures to connect.
  if (/^(08|28|3D)/.test(state)) return messages.connectionFailed(target, reason);
  return messages.databaseError(target, `${reason} (SQLSTATE ${state})`);
}
