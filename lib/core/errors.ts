import type { StandardSchemaIssue } from './standard-schema';

/**
 * Every error this library raises on purpose extends {@link WorkhorseError}, so callers can
 * tell our refusals apart from driver or network failures with one `instanceof`.
 */
export class WorkhorseError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * Input that breaks a rule (shape, range, size, JSON-ness). Raised before anything is written,
 * by the TypeScript client and again by the SQL functions (SQLSTATE `P1001`).
 *
 * @example
 * try { await queue.enqueue('', {}); } catch (e) {
 *   if (e instanceof WorkhorseValidationError) console.log(e.field); // "type"
 * }
 */
export class WorkhorseValidationError extends WorkhorseError {
  constructor(
    /** The offending field, as a path such as `payload.items[3]` or `requests[2].priority`. */
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

/**
 * The database holds no `workhorse` schema: raised by `verifySchema` (and the Nest module's
 * `schema: 'verify'`), and by `Queue`, `Admin` and the worker when they call the protocol's
 * functions in a database where nobody installed it. The message says how to install it.
 *
 * @example
 * try { await queue.enqueue('email.send', { to }); } catch (e) {
 *   if (e instanceof SchemaNotInstalledError) console.error(e.message); // "... Run `npx workhorse schema migrate` ..."
 * }
 */
export class SchemaNotInstalledError extends WorkhorseError {
  constructor(readonly expected: number) {
    super(
      `The workhorse schema is not installed in this database (this package needs version ${expected}). ` +
        'Run `npx workhorse schema migrate` or call installSchema(pool) once, then start again.',
    );
  }
}

/**
 * The database holds a schema version this package cannot work with: newer than the package
 * (raised by `installSchema`, which never downgrades, and by `verifySchema`), or older than the
 * oldest version its calls still exist in (`verifySchema`; `installSchema` migrates it). Nothing
 * is changed. `minimum`..`expected` is the range this package accepts.
 */
export class SchemaVersionMismatchError extends WorkhorseError {
  constructor(
    readonly installed: number,
    readonly expected: number,
    readonly minimum: number = expected,
  ) {
    super(
      installed > expected
        ? `The workhorse schema in this database is version ${installed}, newer than this package (version ${expected}), ` +
            'and it no longer serves this release: upgrade the package to a release that works with it. A schema is never downgraded.'
        : `The workhorse schema in this database is version ${installed}, older than this package needs ` +
            `(version ${minimum} to ${expected}): run \`npx workhorse schema migrate\` or call installSchema(pool) as the ` +
            "schema's owner, then start again. Queued jobs, schedules and history are kept.",
    );
  }
}

/**
 * An upgrade of the schema could not be made: the database is older than the first version
 * that can be migrated, this package lacks a step file, the role may not migrate, or a step
 * failed. `version` is the step it stopped at (null when none ran); the message says what was
 * applied and what to do.
 */
export class SchemaMigrationError extends WorkhorseError {
  /** True when the role may not migrate (it is not the schema's owner nor a member of it). */
  readonly roleRefused: boolean;

  constructor(
    message: string,
    readonly version: number | null,
    options?: { cause?: unknown; roleRefused?: boolean },
  ) {
    super(message, options);
    this.roleRefused = options?.roleRefused ?? false;
  }
}

/**
 * No database connection within the pool's connect timeout (`connectionTimeoutMillis`, 10 s
 * unless the pool sets it). `waited` says which part ran out of time: `'connect'`, opening a new
 * connection (the server accepted none, or accepted one and never answered); `'pool'`, waiting
 * for a connection of the pool to become free (all `max` of them were in use). Raised instead of
 * waiting forever, by start-up (the Nest module, `installSchema`) and by `Queue` and `Admin`.
 *
 * @example
 * try { await installSchema(pool); } catch (e) {
 *   if (e instanceof ConnectTimeoutError) console.error(`${e.target}: no connection within ${e.timeoutMs} ms`);
 * }
 */
export class ConnectTimeoutError extends WorkhorseError {
  constructor(
    /** `host:port/database` (never the user or password). */
    readonly target: string,
    /** The timeout that ran out, in milliseconds. */
    readonly timeoutMs: number,
    /** Opening a new connection (`'connect'`) or waiting for a free one of the pool (`'pool'`). */
    readonly waited: 'connect' | 'pool',
    options?: { cause?: unknown },
  ) {
    super(
      waited === 'connect'
        ? `Could not connect to PostgreSQL at ${target} within ${timeoutMs} ms: the server did not complete the ` +
            'connection. Check the host and port (a port of another service, or a firewall that drops packets, ' +
            'looks like this) and that the server is up and not overloaded. To wait longer, set ' +
            "connectionTimeoutMillis in the pool's settings (poolConfig of WorkhorseModule)."
        : `No connection to PostgreSQL at ${target} became free within ${timeoutMs} ms: every connection of the ` +
            'pool was in use. Give the pool more connections (max), hold them for less time (long transactions), ' +
            "or wait longer with connectionTimeoutMillis in the pool's settings (poolConfig of WorkhorseModule).",
      options,
    );
  }
}

/** A cursor string that this library did not hand out, or that was altered. */
export class InvalidCursorError extends WorkhorseValidationError {
  constructor() {
    super('cursor', 'is not a cursor returned by this API');
  }
}

/**
 * An idempotency key was reused, while it lives, for a request that differs from the first one.
 * The whole batch (and the caller's transaction) is rolled back.
 */
export class IdempotencyConflictError extends WorkhorseValidationError {
  constructor(
    field: string,
    message: string,
    /** The job the key already stands for. */
    readonly existingJobId: string,
    /** The request fields that differ, e.g. `["payload", "priority"]`. */
    readonly fields: string[],
  ) {
    super(field, message);
  }
}

/**
 * A `dependsOn` entry names no job the enqueueing transaction can see (SQLSTATE `P1020`).
 * Nothing of the batch is written.
 */
export class UnknownDependencyError extends WorkhorseValidationError {
  constructor(
    field: string,
    message: string,
    /** The id that names no job. */
    readonly jobId: string,
  ) {
    super(field, message);
  }
}

/**
 * `ctx.runChild` / `ctx.runChildren` was called under a key that an earlier run of the handler
 * used for other child jobs (SQLSTATE `P1021`): a handler must ask for the same children under
 * the same key on every run.
 */
export class ChildJobConflictError extends WorkhorseValidationError {
  constructor(
    field: string,
    message: string,
    /** The children the key already stands for. */
    readonly childIds: string[],
  ) {
    super(field, message);
  }
}

/**
 * Thrown by `ctx.runChild` when the child job ended `failed` or `canceled`; carries the child's
 * error envelope. A handler may catch it (and, say, compensate) or let it fail the attempt.
 */
export class ChildJobFailedError extends WorkhorseError {
  constructor(
    readonly childId: string,
    readonly childState: 'failed' | 'canceled',
    /** The child's terminal error envelope. */
    readonly childError: { name: string; message: string; stack?: string },
  ) {
    super(`Child job ${childId} ended ${childState}: ${childError.name}: ${childError.message}`);
    this.name = 'ChildJobFailedError';
  }
}

/**
 * A schedule's cron expression that the cron library refuses, or that never occurs (such as
 * `0 0 31 2 *`). Raised before anything is written; the message names the schedule.
 *
 * @example
 * try { await queue.syncSchedules('default', [{ key: 'nightly', type: 'report', cron: '0 25 * * *' }]); } catch (e) {
 *   if (e instanceof InvalidCronError) console.log(e.scheduleKey, e.expression); // "nightly", "0 25 * * *"
 * }
 */
export class InvalidCronError extends WorkhorseValidationError {
  constructor(
    /** The key of the schedule it belongs to. */
    readonly scheduleKey: string,
    /** The expression as given. */
    readonly expression: string,
    detail: string,
  ) {
    super('cron', `schedule "${scheduleKey}" has an invalid cron expression "${expression}": ${detail}`);
  }
}

/** A schedule's time zone that is not an IANA time zone name this runtime knows. Raised before anything is written. */
export class UnknownTimeZoneError extends WorkhorseValidationError {
  constructor(
    /** The key of the schedule it belongs to. */
    readonly scheduleKey: string,
    /** The zone as given. */
    readonly timezone: string,
  ) {
    super('timezone', `schedule "${scheduleKey}" names an unknown time zone "${timezone}" (give an IANA name such as Europe/Berlin)`);
  }
}

/** No schedule has that key in that namespace (SQLSTATE `P1010`). */
export class ScheduleNotFoundError extends WorkhorseValidationError {
  constructor(message: string) {
    super('key', message);
  }
}

/** The reason `ctx.signal` aborts when an operator canceled the running job. */
export class JobCanceledError extends WorkhorseError {
  constructor(readonly jobId: string) {
    super(`Job ${jobId} was canceled; stop work and return or throw.`);
  }
}

/**
 * The reason `ctx.signal` aborts when this worker lost the job's lease (heartbeats failed for
 * longer than the lease, or another worker took the job over). Nothing the handler does after
 * this is recorded.
 */
export class LeaseLostError extends WorkhorseError {
  constructor(readonly jobId: string) {
    super(`Job ${jobId}: this worker lost the lease; another worker may run the job.`);
  }
}

/**
 * The reason `ctx.signal` aborts when the worker shut down before the handler finished. The job
 * is not failed: its lease expires and another worker runs it again.
 */
export class WorkerShutdownError extends WorkhorseError {
  constructor(readonly jobId: string) {
    super(`Job ${jobId}: the worker is shutting down; the job will run again elsewhere.`);
  }
}

/** A worker was used the wrong way (registered twice, started twice, ...). */
export class WorkerStateError extends WorkhorseError {}

/**
 * Throw it (or any error with `retryable: false`) from a handler to fail the job at once,
 * whatever attempts remain.
 *
 * @example
 * if (!account) throw new NonRetryableError(`account ${id} does not exist`);
 */
export class NonRetryableError extends Error {
  readonly retryable = false;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * Throw it (or any error with a numeric `retryDelayMs`) from a handler to choose the delay
 * before the next attempt, instead of the retry policy's.
 *
 * @example
 * if (response.status === 429) throw new RetryAfterError('rate limited', Number(response.headers.get('retry-after')) * 1000);
 */
export class RetryAfterError extends Error {
  constructor(
    message: string,
    readonly retryDelayMs: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The reason `ctx.signal` aborts when the attempt ran past the job's `executionTimeoutMs`. */
export class ExecutionTimeoutError extends WorkhorseError {
  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
  ) {
    super(`Job ${jobId}: the attempt ran longer than its execution timeout of ${timeoutMs} ms.`);
  }
}

/**
 * A job definition's Standard Schema validator refused a payload (at enqueue, before anything is
 * written) or a handler's result (before it is recorded). A refused result is final, as a
 * {@link NonRetryableError} is (`retryable: false`): the same handler would give it again, so
 * the job fails at once, whatever attempts remain, with this error (and so the validator's
 * issues) in its error envelope. `issues` are the validator's own, each with its message and path.
 *
 * @example
 * try {
 *   await queue.enqueue(sendEmail, { to: 'not an address' });
 * } catch (error) {
 *   if (error instanceof JobDataRejectedError) console.log(error.issues.map((issue) => issue.message));
 * }
 */
export class JobDataRejectedError extends WorkhorseValidationError {
  /** `false` for a refused result (the worker fails the job at once); absent for a refused payload. */
  readonly retryable?: false;

  constructor(
    /** `payload`, `result`, or `requests[i].payload` in a batch of `enqueueMany`. */
    field: 'payload' | 'result' | `requests[${number}].payload`,
    /** The job type whose definition refused it. */
    readonly type: string,
    readonly issues: readonly StandardSchemaIssue[],
  ) {
    super(field, `refused by the validator of job type "${type}": ${issues.map(describeIssue).join('; ')}`);
    if (field === 'result') this.retryable = false;
  }
}

function describeIssue(issue: StandardSchemaIssue): string {
  const path = (issue.path ?? []).map((segment) => String(typeof segment === 'object' ? segment.key : segment));
  return path.length === 0 ? issue.message : `${path.join('.')}: ${issue.message}`;
}

/**
 * A human decision that is not one of its wait's `choices` (SQLSTATE `P1030`). Nothing was
 * written; the caller's transaction is rolled back.
 */
export class DecisionNotAllowedError extends WorkhorseValidationError {
  constructor(
    message: string,
    /** The choices the wait offers. */
    readonly choices: string[],
  ) {
    super('decision', message);
  }
}

/**
 * Thrown by `ctx.waitForSignal` when its timeout passed before a signal of that name arrived.
 * The handler may catch it and go on (the wait stays timed out on every replay).
 */
export class SignalTimeoutError extends WorkhorseError {
  constructor(
    readonly jobId: string,
    /** The signal's name. */
    readonly signalName: string,
    readonly timeoutAt: Date,
  ) {
    super(`Job ${jobId}: no signal "${signalName}" arrived by ${timeoutAt.toISOString()}.`);
  }
}

/**
 * Thrown by `ctx.waitForHuman` when its timeout passed before anyone decided. The handler may
 * catch it and go on (the wait stays timed out on every replay).
 */
export class HumanWaitTimeoutError extends WorkhorseError {
  constructor(
    readonly jobId: string,
    /** The wait's name. */
    readonly waitName: string,
    readonly timeoutAt: Date,
  ) {
    super(`Job ${jobId}: no decision on "${waitName}" by ${timeoutAt.toISOString()}.`);
  }
}

