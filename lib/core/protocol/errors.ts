import type { Pool } from 'pg';
import { NotYoursError } from '../capability-errors';
import { JobActionRefusedError } from '../job-action-errors';
import { fromConnectTimeout } from '../connect-timeout';
import {
  ChildJobConflictError,
  DecisionNotAllowedError,
  IdempotencyConflictError,
  InvalidCursorError,
  ScheduleNotFoundError,
  SchemaNotInstalledError,
  UnknownDependencyError,
  WorkhorseError,
  WorkhorseValidationError,
} from '../errors';
import { SCHEMA_VERSION } from '../schema';

// The one place a database error becomes this library's typed error.

interface PgErrorLike {
  code?: string;
  message: string;
  column?: string;
  detail?: string;
}

/**
 * A claim ran inside a transaction above READ COMMITTED, where SKIP LOCKED is not safe (SQLSTATE
 * `P1004`); nothing was claimed. Python and Go raise their `IsolationError` for the same code.
 */
export class IsolationError extends WorkhorseError {}

/** SQLSTATEs of the protocol's own refusals (the `P1xxx` range). */
export const SQLSTATE = {
  validation: 'P1001',
  batchTooLarge: 'P1003',
  isolation: 'P1004',
  idempotencyConflict: 'P1005',
  scheduleNotFound: 'P1010',
  unknownDependency: 'P1020',
  childJobConflict: 'P1021',
  decisionNotAllowed: 'P1030',
  notYours: 'P1040',
  jobActionRefused: 'P1050',
} as const;

// SQLSTATE 3F000 (invalid_schema_name): a `workhorse.*` function called where no such schema exists.
const NO_SUCH_SCHEMA = '3F000';

function isMissingSchema(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  return typeof e === 'object' && e !== null && e.code === NO_SUCH_SCHEMA && typeof e.message === 'string' && e.message.includes('"workhorse"');
}

function fromRefusal(e: PgErrorLike): unknown {
  const field = e.column ?? 'request';
  const prefix = `${field}: `;
  const message = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
  // The database refuses a cursor it did not make (cursor_position): the SDK's cursor error.
  if (e.code === SQLSTATE.validation && field === 'cursor') return new InvalidCursorError();
  switch (e.code) {
    case SQLSTATE.validation:
    case SQLSTATE.batchTooLarge:
      return new WorkhorseValidationError(field, message);
    case SQLSTATE.isolation:
      return new IsolationError(message);
    case SQLSTATE.scheduleNotFound:
      return new ScheduleNotFoundError(message);
    case SQLSTATE.notYours:
      return new NotYoursError(field, message);
    case SQLSTATE.unknownDependency: {
      const detail = JSON.parse(e.detail ?? '{}') as { jobId?: string };
      return new UnknownDependencyError(field, message, detail.jobId ?? '');
    }
    case SQLSTATE.childJobConflict: {
      const detail = JSON.parse(e.detail ?? '{}') as { childIds?: string[] };
      return new ChildJobConflictError(field, message, detail.childIds ?? []);
    }
    case SQLSTATE.decisionNotAllowed: {
      const detail = JSON.parse(e.detail ?? '{}') as { choices?: string[] };
      return new DecisionNotAllowedError(message, detail.choices ?? []);
    }
    case SQLSTATE.jobActionRefused: {
      const detail = JSON.parse(e.detail ?? '{}') as { jobId?: string; action?: string; state?: string };
      return new JobActionRefusedError(`job ${detail.jobId ?? ''} ${message}`, detail.jobId ?? '', detail.action ?? '', detail.state ?? '');
    }
    case SQLSTATE.idempotencyConflict: {
      const detail = JSON.parse(e.detail ?? '{}') as { existingJobId?: string; fields?: string[] };
      return new IdempotencyConflictError(field, message, detail.existingJobId ?? '', detail.fields ?? []);
    }
    default:
      return null;
  }
}

/**
 * Turns an error raised by a `workhorse.*` SQL function into this library's typed error: the
 * protocol's refusals (SQLSTATEs `P1xxx`) always. Given the `pool` a client call (`Queue`,
 * `Admin`, `grantRole`) runs on, also a database without the schema (as
 * {@link SchemaNotInstalledError}, saying what to run) and a connection not had in time (as a
 * `ConnectTimeoutError`). Anything else is returned unchanged. The worker's round trip passes
 * no pool: there a typed error means "the database refused this result" and fails the attempt.
 */
export function fromPgError(error: unknown, pool?: Pool): unknown {
  const e = error as PgErrorLike | null;
  if (e && typeof e === 'object' && typeof e.code === 'string') {
    const typed = fromRefusal(e);
    if (typed !== null) return typed;
  }
  if (pool === undefined) return error;
  if (isMissingSchema(error)) return new SchemaNotInstalledError(SCHEMA_VERSION);
  return fromConnectTimeout(error, pool);
}
