import { WorkhorseValidationError } from './errors';
import { call } from './protocol/call';
import { LIST_HUMAN_WAITS } from './protocol/admin';
import { COMPLETE_HUMAN_WAIT, SEND_SIGNAL } from './protocol/producer';
import { checkCursor } from './cursor';
import { toPage, type PagedRow } from './paging';
import type { JsonValue, Page, Queryable } from './types';
import { PROTOCOL_LIMITS } from './limits';
import { checkJobId, checkOptions, checkParamInteger, checkParamText, checkWholeNumber, toJsonText } from './validation';

/** What `queue.sendSignal` did. See {@link SendSignalOptions}. */
export type SendSignalStatus = 'delivered' | 'buffered' | 'duplicate' | 'not_found' | 'finished';

export interface SendSignalOptions {
  /** A repeat of a send with the same key (per job and signal name) writes nothing and answers `duplicate`. */
  idempotencyKey?: string;
}

export interface WaitForSignalOptions {
  /** After this long (from the first time the wait is reached) the wait throws `SignalTimeoutError`. */
  timeoutMs?: number;
}

export interface WaitForHumanOptions {
  /** What the person deciding needs to see (JSON, at most 1 MiB); listed by `admin.listHumanWaits`. */
  context?: JsonValue;
  /** The decision must be one of these (1 to 50 distinct strings); any JSON value when absent. */
  choices?: readonly string[];
  /** After this long (from the first time the wait is reached) the wait throws `HumanWaitTimeoutError`. */
  timeoutMs?: number;
}

/**
 * A recorded human decision, as `ctx.waitForHuman` returns it: plain JSON, so a handler can
 * return it as its result or checkpoint it as it is.
 */
export interface HumanDecision<D = JsonValue> {
  decision: D;
  actor: string;
  reason: string | null;
  /** When it was decided, by the database's clock: an ISO 8601 string in UTC (`new Date(decidedAt)` for a Date). */
  decidedAt: string;
}

export interface CompleteHumanWaitOptions {
  /** Who decided (1 to 200 characters); recorded with the decision and in the timeline. */
  actor: string;
  /** Why (at most 1000 characters). */
  reason?: string;
  /** A repeat with the same key after the decision was recorded answers `duplicate`. */
  idempotencyKey?: string;
}

/** What `queue.completeHumanWait` did. */
export type CompleteHumanWaitStatus = 'completed' | 'duplicate' | 'already_decided' | 'timed_out' | 'not_waiting' | 'not_found' | 'finished';

/** An open human wait, as `admin.listHumanWaits` lists it. */
export interface HumanWait {
  jobId: string;
  queue: string;
  type: string;
  name: string;
  context: JsonValue | null;
  choices: string[] | null;
  timeoutAt: Date | null;
  attempt: number;
  createdAt: Date;
}

export interface ListHumanWaitsFilter {
  queue?: string;
  type?: string;
  /** The wait's name. */
  name?: string;
  jobId?: string;
  /** Page size, 1 to 1000 (default 50). */
  limit?: number;
  cursor?: string;
}

// Names, keys, actors and reasons go to the SQL functions as they are given; their bounds are
// the functions' (check_wait_name, check_wait_key, check_actor).
function checkKey(value: unknown): string | null {
  return value === undefined ? null : checkParamText(value, 'idempotencyKey');
}

/** See `Queue.sendSignal`. */
export async function sendSignal(
  db: Queryable,
  jobId: string,
  name: string,
  payload: unknown,
  options: SendSignalOptions | undefined,
): Promise<SendSignalStatus> {
  checkJobId(jobId);
  checkParamText(name, 'name');
  const text = payload === undefined ? null : toJsonText(payload, 'payload');
  const key = checkKey(checkOptions(options, 'options', ['idempotencyKey'], 'a signal option').idempotencyKey);
  const rows = await call<{ status: SendSignalStatus }>(db, SEND_SIGNAL, [
    jobId,
    name,
    text,
    key,
  ]);
  return rows[0].status;
}

/** See `Queue.completeHumanWait`. */
export async function completeHumanWait(
  db: Queryable,
  jobId: string,
  name: string,
  decision: unknown,
  options: CompleteHumanWaitOptions,
): Promise<CompleteHumanWaitStatus> {
  checkJobId(jobId);
  checkParamText(name, 'name');
  const text = toJsonText(decision, 'decision');
  if (options === undefined) throw new WorkhorseValidationError('options.actor', 'is required: who decided');
  const given = checkOptions(options, 'options', ['actor', 'reason', 'idempotencyKey'], 'a decision option');
  const actor = checkParamText(given.actor, 'actor');
  const reason = given.reason === undefined ? null : checkParamText(given.reason, 'reason');
  const key = checkKey(given.idempotencyKey);
  const rows = await call<{ status: CompleteHumanWaitStatus }>(db, COMPLETE_HUMAN_WAIT, [jobId, name, text, actor, reason, key]);
  return rows[0].status;
}

interface HumanWaitRow {
  id: string;
  job_id: string;
  queue: string;
  type: string;
  name: string;
  context: JsonValue | null;
  choices: string[] | null;
  timeout_at: Date | null;
  attempt: number;
  created_at: Date;
}

/** See `Admin.listHumanWaits`; the cursor is the database's, passed through as it is. */
export async function listHumanWaits(
  db: Queryable,
  filter: ListHumanWaitsFilter,
): Promise<Page<HumanWait>> {
  const given = checkOptions(filter, 'filter', ['queue', 'type', 'name', 'jobId', 'limit', 'cursor'], 'a human-wait filter');
  const queue = given.queue === undefined ? null : checkParamText(given.queue, 'queue');
  const type = given.type === undefined ? null : checkParamText(given.type, 'type');
  const name = given.name === undefined ? null : checkParamText(given.name, 'name');
  const jobId = given.jobId === undefined ? null : checkJobId(given.jobId);
  const limit = given.limit === undefined ? 50 : checkParamInteger(given.limit, 'limit');
  const rows = await call<HumanWaitRow & PagedRow>(db, LIST_HUMAN_WAITS, [
    queue,
    type,
    name,
    jobId,
    limit,
    checkCursor(given.cursor),
  ]);
  return toPage(rows, (row) => ({
    jobId: row.job_id,
    queue: row.queue,
    type: row.type,
    name: row.name,
    context: row.context,
    choices: row.choices,
    timeoutAt: row.timeout_at,
    attempt: row.attempt,
    createdAt: row.created_at,
  }));
}

/** A wait's timeout (a whole number of ms; its range, 1 ms to one year, is the SQL's), or null when none was given. */
export function checkWaitTimeout(value: unknown): number | null {
  return value === undefined ? null : checkWholeNumber(value, 'timeoutMs', PROTOCOL_LIMITS.handler.waitTimeoutMs);
}

/** Checks a human wait's options; returns the context's JSON text and the choices' (or nulls). */
export function checkHumanWaitOptions(options: WaitForHumanOptions | undefined): {
  context: string | null;
  choices: string | null;
  timeoutMs: number | null;
} {
  const given = checkOptions(options, 'options', ['context', 'choices', 'timeoutMs'], 'a human-wait option');
  const context = given.context === undefined ? null : toJsonText(given.context, 'context');
  // (How many choices, how long and whether distinct is wait_human_v1's to check.)
  const choices = given.choices === undefined ? null : toJsonText(given.choices, 'choices');
  return { context, choices, timeoutMs: checkWaitTimeout(given.timeoutMs) };
}
