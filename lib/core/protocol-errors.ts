import {
  ChildJobConflictError,
  DecisionNotAllowedError,
  IdempotencyConflictError,
  ScheduleNotFoundError,
  UnknownDependencyError,
  WorkhorseError,
  WorkhorseValidationError,
} from './errors';
import { NotYoursError } from './capability-errors';

// The protocol's refusals (SQLSTATEs in the P1xxx range) as this library's typed errors.

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
} as const;

/**
 * Turns an error raised by a `workhorse.*` SQL function into our typed error; anything else is
 * returned unchanged.
 */
export function fromPgError(error: unknown): unknown {
  const e = error as PgErrorLike;
  if (e && typeof e === 'object' && typeof e.code === 'string') {
    const field = e.column ?? 'request';
    const prefix = `${field}: `;
    const message = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
    if (e.code === SQLSTATE.validation || e.code === SQLSTATE.batchTooLarge) {
      return new WorkhorseValidationError(field, message);
    }
    if (e.code === SQLSTATE.isolation) return new IsolationError(message);
    if (e.code === SQLSTATE.scheduleNotFound) return new ScheduleNotFoundError(message);
    if (e.code === SQLSTATE.notYours) return new NotYoursError(field, message);
    if (e.code === SQLSTATE.unknownDependency) {
      const detail = JSON.parse(e.detail ?? '{}') as { jobId?: string };
      return new UnknownDependencyError(field, message, detail.jobId ?? '');
    }
    if (e.code === SQLSTATE.childJobConflict) {
      const detail = JSON.parse(e.detail ?? '{}') as { childIds?: string[] };
      return new ChildJobConflictError(field, message, detail.childIds ?? []);
    }
    if (e.code === SQLSTATE.decisionNotAllowed) {
      const detail = JSON.parse(e.detail ?? '{}') as { choices?: string[] };
      return new DecisionNotAllowedError(message, detail.choices ?? []);
    }
    if (e.code === SQLSTATE.idempotencyConflict) {
      const detail = JSON.parse(e.detail ?? '{}') as { existingJobId?: string; fields?: string[] };
      return new IdempotencyConflictError(field, message, detail.existingJobId ?? '', detail.fields ?? []);
    }
  }
  return error;
}
