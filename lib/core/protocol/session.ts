// Statements of a connection rather than of the protocol: transactions, notifications and the
// reads a client makes of the installed schema before it trusts it.

export const BEGIN = 'BEGIN';
export const COMMIT = 'COMMIT';
export const ROLLBACK = 'ROLLBACK';
export const BEGIN_READ_ONLY = 'BEGIN READ ONLY';

/** A transaction-local statement timeout (a whole number of milliseconds; never user input). */
export function setLocalStatementTimeout(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0) throw new RangeError(`statement timeout must be a whole number of milliseconds, not ${ms}`);
  return `SET LOCAL statement_timeout = ${ms}`;
}

/** The channel every queue's new ready work is notified on (the queue's name is the payload). */
export const NOTIFY_CHANNEL = 'workhorse_jobs';

/** Listens to NOTIFY_CHANNEL. */
export const LISTEN = `LISTEN ${NOTIFY_CHANNEL}`;

/** The channel a job's end is notified on while someone awaits it (payload: ended job ids, comma-separated). */
export const RESULTS_CHANNEL = 'workhorse_results';

/** Listens to RESULTS_CHANNEL. */
export const LISTEN_RESULTS = `LISTEN ${RESULTS_CHANNEL}`;

/** Whether the schema is installed. */
export const HAS_SCHEMA = "SELECT to_regclass('workhorse.schema_version') IS NOT NULL AS present";

/** The installed version, and whether this login may call oldest_client_v1 (null: it does not exist). */
export const INSTALLED_VERSION = `SELECT s.version,
            (SELECT pg_catalog.has_function_privilege(p.oid, 'EXECUTE') FROM pg_catalog.pg_proc p
             WHERE p.oid = pg_catalog.to_regprocedure('workhorse.oldest_client_v1()')) AS callable
     FROM workhorse.schema_version s`;

/** The oldest client release the installed schema still serves. */
export const OLDEST_CLIENT = 'SELECT workhorse.oldest_client_v1() AS oldest';
