import { checkCursor } from '../cursor';
import { WorkhorseValidationError } from '../errors';
import { toPage, type PagedRow } from '../paging';
import { call as query } from '../protocol/call';
import { ERROR_GROUPS, FIND_JOBS, JOB_DURATIONS, JOB_TIMINGS } from '../protocol/admin';
import { toSnapshot, type JobRow } from '../protocol/job-row';
import type { JobSnapshot, JsonValue, Page, Queryable } from '../types';

// Reads for an operator in an incident: find jobs by tag, payload or error; a page of jobs'
// run and wait times; timing percentiles per queue or type; failures grouped by error. The
// rules (bounds, windows, which index serves a search) are in sql/068_dashboard_insights.sql.

/** What `admin.findJobs()` searches by: at least one of `tag`, `payload`, `error`. */
export interface FindJobsFilter {
  /** Jobs whose tags include this one. */
  tag?: string;
  /** Jobs whose payload contains this object (`payload @> ...`): `{ orderId: 42 }`. */
  payload?: { [key: string]: JsonValue };
  /** Jobs whose error (terminal, or the last attempt's) has this name or a message containing this text. */
  error?: string;
  /** 1 to 1000, default 50. */
  limit?: number;
  /**
   * Jobs one call examines at most, newest first, when no index serves the search (default
   * 10,000): a partial page then comes with a cursor to search older jobs.
   */
  scanLimit?: number;
  cursor?: string;
}

/** When a job's latest attempt started, how long it ran (so far, while it runs), and how long it waited to start. */
export interface JobDuration {
  startedAt: Date | null;
  runMs: number | null;
  waitMs: number | null;
}

/** Run and wait time percentiles (ms) of one queue or job type over a window. */
export interface TimingStats {
  name: string;
  /** Attempts read. */
  attempts: number;
  run: { p50: number; p90: number; p99: number };
  /** Null when no first attempt of the sample started in the window. */
  wait: { p50: number; p90: number; p99: number } | null;
  /** True when the window held more attempts than the sample read. */
  sampled: boolean;
}

/** Failures of a window with the same error name and message. */
export interface ErrorGroup {
  name: string;
  message: string;
  failures: number;
  queues: string[];
  firstSeen: Date;
  lastSeen: Date;
}

export async function findJobs(db: Queryable, filter: FindJobsFilter): Promise<Page<JobSnapshot>> {
  const payload = filter.payload;
  if (payload !== undefined && (payload === null || typeof payload !== 'object' || Array.isArray(payload))) {
    throw new WorkhorseValidationError('payload', 'must be a JSON object, such as { orderId: 42 }');
  }
  const rows = await query<JobRow & PagedRow>(db, FIND_JOBS, [
    filter.tag ?? null,
    payload === undefined ? null : JSON.stringify(payload),
    filter.error ?? null,
    filter.limit ?? 50,
    checkCursor(filter.cursor),
    filter.scanLimit ?? 10_000,
  ]);
  // The last row, when the search goes on, carries only the database's cursor (see find_jobs_v1).
  return toPage(rows, toSnapshot);
}

export async function jobDurations(db: Queryable, jobIds: readonly string[]): Promise<Map<string, JobDuration>> {
  type Row = { job_id: string; started_at: Date | null; run_ms: string | null; wait_ms: string | null };
  const rows = await query<Row>(db, JOB_DURATIONS, [jobIds]);
  const num = (value: string | null): number | null => (value === null ? null : Number(value));
  return new Map(rows.map((r) => [r.job_id, { startedAt: r.started_at, runMs: num(r.run_ms), waitMs: num(r.wait_ms) }]));
}

export async function jobTimings(db: Queryable, since: Date, group: 'queue' | 'type', sample: number): Promise<TimingStats[]> {
  type Row = {
    name: string; attempts: string; run_p50_ms: number; run_p90_ms: number; run_p99_ms: number;
    wait_p50_ms: number | null; wait_p90_ms: number | null; wait_p99_ms: number | null; sampled: boolean;
  };
  const rows = await query<Row>(db, JOB_TIMINGS, [since, group, sample]);
  return rows.map((r) => ({
    name: r.name,
    attempts: Number(r.attempts),
    run: { p50: r.run_p50_ms, p90: r.run_p90_ms, p99: r.run_p99_ms },
    wait: r.wait_p50_ms === null ? null : { p50: r.wait_p50_ms, p90: r.wait_p90_ms ?? 0, p99: r.wait_p99_ms ?? 0 },
    sampled: r.sampled,
  }));
}

export async function errorGroups(db: Queryable, since: Date, limit: number): Promise<ErrorGroup[]> {
  type Row = { error_name: string; message: string; failures: string; queues: string[]; first_seen: Date; last_seen: Date };
  const rows = await query<Row>(db, ERROR_GROUPS, [since, limit]);
  return rows.map((r) => ({
    name: r.error_name,
    message: r.message,
    failures: Number(r.failures),
    queues: r.queues,
    firstSeen: r.first_seen,
    lastSeen: r.last_seen,
  }));
}
