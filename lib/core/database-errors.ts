import type { Pool } from 'pg';
import { fromConnectTimeout } from './connect-timeout';
import { SchemaNotInstalledError } from './errors';
import { fromPgError } from './protocol-errors';
import { SCHEMA_VERSION } from './schema';

// SQLSTATE 3F000 (invalid_schema_name): a `workhorse.*` function called where no such schema exists.
const NO_SUCH_SCHEMA = '3F000';

function isMissingSchema(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  return typeof e === 'object' && e !== null && e.code === NO_SUCH_SCHEMA && typeof e.message === 'string' && e.message.includes('"workhorse"');
}

/**
 * What a client call (`Queue`, `Admin`, `grantRole`) raises for a database error: the
 * protocol's refusals as {@link fromPgError} types them, a database without the schema as
 * {@link SchemaNotInstalledError} (saying what to run), and a connection not had in time as a
 * `ConnectTimeoutError`; anything else unchanged. Not for the worker's round trip, where a typed
 * error means "the database refused this result" and fails the job's attempt.
 */
export function fromDatabaseError(error: unknown, pool: Pool): unknown {
  const typed = fromPgError(error);
  if (typed !== error) return typed;
  if (isMissingSchema(error)) return new SchemaNotInstalledError(SCHEMA_VERSION);
  return fromConnectTimeout(error, pool);
}
