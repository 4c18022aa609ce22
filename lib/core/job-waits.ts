import { call } from './protocol/call';
import { JOB_SIGNALS, JOB_WAITS } from './protocol/admin';
import type { JsonValue, Queryable } from './types';
import { checkJobId, checkOptions, checkParamInteger } from './validation';

/** A signal sent to a job, as `admin.listJobSignals` lists it. */
export interface JobSignal {
  /** The signal's number (send order across all jobs). */
  id: string;
  name: string;
  payload: JsonValue | null;
  /** `buffered` until a wait for its name consumes it, then `consumed`. */
  status: 'buffered' | 'consumed';
  /** The wait that consumed it: its number among the job's waits for this name. */
  waitSeq: number | null;
  sentAt: Date;
}

/** A wait a job's handler reached, as `admin.listJobWaits` lists it. */
export interface JobWait {
  /** `signal` (`ctx.waitForSignal`) or `human` (`ctx.waitForHuman`). */
  kind: 'signal' | 'human';
  name: string;
  /** For a signal wait, its number among the waits for this name in a run (a human wait is 1). */
  seq: number;
  status: 'open' | 'delivered' | 'decided' | 'timed_out';
  /** When the wait gives up (`SignalTimeoutError`, `HumanWaitTimeoutError`), or null. */
  timeoutAt: Date | null;
  attempt: number;
  createdAt: Date;
  /** When it was answered or timed out. */
  resolvedAt: Date | null;
  /** The signal that answered a signal wait. */
  signalId: string | null;
  /** A human wait's context, choices and, once decided, its decision, actor and reason. */
  context: JsonValue | null;
  choices: string[] | null;
  decision: JsonValue | null;
  actor: string | null;
  reason: string | null;
}

/** Options of `admin.listJobSignals` and `admin.listJobWaits`. */
export interface JobWaitsOptions {
  /** At most this many, the newest first: 1 to 1000 (default 100). */
  limit?: number;
}

interface SignalRow {
  id: string;
  name: string;
  payload: JsonValue | null;
  status: JobSignal['status'];
  wait_seq: number | null;
  sent_at: Date;
}

interface WaitRow {
  kind: JobWait['kind'];
  name: string;
  seq: number;
  status: JobWait['status'];
  timeout_at: Date | null;
  attempt: number;
  created_at: Date;
  resolved_at: Date | null;
  signal_id: string | null;
  context: JsonValue | null;
  choices: string[] | null;
  decision: JsonValue | null;
  actor: string | null;
  reason: string | null;
}

function limitOf(options: JobWaitsOptions | undefined): number {
  const given = checkOptions(options, 'options', ['limit'], 'an option of a job\u2019s signals or waits');
  return given.limit === undefined ? 100 : checkParamInteger(given.limit, 'limit');
}

/** See `Admin.listJobSignals`. */
export async function listJobSignals(db: Queryable, jobId: string, options?: JobWaitsOptions): Promise<JobSignal[]> {
  checkJobId(jobId);
  const rows = await call<SignalRow>(db, JOB_SIGNALS, [jobId, limitOf(options)]);
  return rows.map((r) => ({ id: r.id, name: r.name, payload: r.payload, status: r.status, waitSeq: r.wait_seq, sentAt: r.sent_at }));
}

/** See `Admin.listJobWaits`. */
export async function listJobWaits(db: Queryable, jobId: string, options?: JobWaitsOptions): Promise<JobWait[]> {
  checkJobId(jobId);
  const rows = await call<WaitRow>(db, JOB_WAITS, [jobId, limitOf(options)]);
  return rows.map((r) => ({
    kind: r.kind,
    name: r.name,
    seq: r.seq,
    status: r.status,
    timeoutAt: r.timeout_at,
    attempt: r.attempt,
    createdAt: r.created_at,
    resolvedAt: r.resolved_at,
    signalId: r.signal_id,
    context: r.context,
    choices: r.choices,
    decision: r.decision,
    actor: r.actor,
    reason: r.reason,
  }));
}
