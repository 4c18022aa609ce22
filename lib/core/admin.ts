import type { Pool } from 'pg';
import { fromPgError, InvalidCursorError, WorkhorseValidationError } from './errors';
import {
  JOB_STATES,
  type CancelResult,
  type ErrorEnvelope,
  type JobSnapshot,
  type JobState,
  type JsonValue,
  type ListJobsFilter,
  type Page,
  type Queryable,
  type RetryPolicy,
  type TimelineEntry,
  type TimelineOptions,
} from './types';
import { checkInteger, checkJobId, checkName } from './validation';

interface JobRow {
  id: string;
  queue: string;
  type: string;
  payload: JsonValue;
  priority: number;
  max_attempts: number;
  retry_policy: RetryPolicy;
  tags: string[];
  state: JobState;
  current_attempt: number;
  run_at: Date;
  created_at: Date;
  finished_at: Date | null;
  result: JsonValue | null;
  error: ErrorEnvelope | null;
  worker_id: string | null;
  lease_expires_at: Date | null;
  cancel_requested_at: Date | null;
  seq: string | null;
}

interface TimelineRow {
  id: string;
  at: Date;
  source: 'event' | 'attempt';
  kind: string;
  attempt: number | null;
  worker_id: string | null;
  fence_token: string | null;
  data: { [key: string]: JsonValue } | null;
}

function toSnapshot(row: JobRow): JobSnapshot {
  return {
    id: row.id,
    queue: row.queue,
    type: row.type,
    payload: row.payload,
    priority: row.priority,
    state: row.state,
    currentAttempt: row.current_attempt,
    maxAttempts: row.max_attempts,
    retryPolicy: row.retry_policy,
    tags: row.tags,
    runAt: row.run_at,
    createdAt: row.created_at,
    finishedAt: row.finished_at,
    result: row.result,
    error: row.error,
    workerId: row.worker_id,
    leaseExpiresAt: row.lease_expires_at,
    cancelRequestedAt: row.cancel_requested_at,
  };
}

// Cursors are opaque to callers: a tag that says which API issued them, and a position.
function encodeCursor(kind: string, position: string): string {
  return Buffer.from(`${kind}:${position}`, 'utf8').toString('base64url');
}

function decodeCursor(kind: string, cursor: string | undefined): string | null {
  if (cursor === undefined || cursor === null) return null;
  if (typeof cursor !== 'string') throw new InvalidCursorError();
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const match = new RegExp(`^${kind}:(\\d{1,19})$`).exec(text);
  if (!match) throw new InvalidCursorError();
  return match[1];
}

/**
 * Operator reads and actions. Every method takes an optional client as its last argument, so
 * admin calls can join a transaction; by default the pool is used.
 *
 * @example
 * const admin = new Admin(pool);
 * const job = await admin.getJob(jobId);
 * console.log(job?.state, job?.currentAttempt, job?.result);
 */
export class Admin {
  constructor(readonly pool: Pool) {}

  /** The job's snapshot, whichever state it is in, or null if no such job exists. */
  async getJob(jobId: string, client?: Queryable): Promise<JobSnapshot | null> {
    checkJobId(jobId);
    const rows = await this.run<JobRow>(client, 'SELECT * FROM workhorse.get_job_v1($1)', [jobId]);
    return rows.length === 0 ? null : toSnapshot(rows[0]);
  }

  /**
   * The job's history (lifecycle events and closed attempts) in the order it was written, a page
   * at a time; pass `nextCursor` back to read on.
   */
  async getJobTimeline(jobId: string, options: TimelineOptions = {}, client?: Queryable): Promise<Page<TimelineEntry>> {
    checkJobId(jobId);
    const limit = options.limit === undefined ? 100 : checkInteger(options.limit, 'limit', 1, 1000);
    const after = decodeCursor('timeline', options.cursor) ?? '0';
    const rows = await this.run<TimelineRow>(client, 'SELECT * FROM workhorse.get_timeline_v1($1, $2, $3)', [
      jobId,
      after,
      limit,
    ]);
    const items = rows.map((row) => ({
      id: row.id,
      at: row.at,
      source: row.source,
      kind: row.kind,
      attempt: row.attempt,
      workerId: row.worker_id,
      fenceToken: row.fence_token,
      data: row.data,
    }));
    const last = rows[rows.length - 1];
    return { items, nextCursor: rows.length === limit ? encodeCursor('timeline', last.id) : null };
  }

  /**
   * Jobs newest first, filtered by queue, type and current state, a page at a time. Paging is
   * stable: jobs enqueued meanwhile do not shift later pages.
   */
  async listJobs(filter: ListJobsFilter = {}, client?: Queryable): Promise<Page<JobSnapshot>> {
    for (const key of Object.keys(filter)) {
      if (!['queue', 'type', 'states', 'limit', 'cursor'].includes(key)) {
        throw new WorkhorseValidationError(key, 'is not a listJobs filter (queue, type, states, limit, cursor)');
      }
    }
    const queue = filter.queue === undefined ? null : checkName(filter.queue, 'queue');
    const type = filter.type === undefined ? null : checkName(filter.type, 'type');
    let states: JobState[] | null = null;
    if (filter.states !== undefined) {
      if (!Array.isArray(filter.states) || filter.states.some((s) => !JOB_STATES.includes(s))) {
        throw new WorkhorseValidationError('states', `must be an array of ${JOB_STATES.join(', ')}`);
      }
      states = filter.states;
    }
    const limit = filter.limit === undefined ? 50 : checkInteger(filter.limit, 'limit', 1, 1000);
    const before = decodeCursor('jobs', filter.cursor);
    const rows = await this.run<JobRow>(client, 'SELECT * FROM workhorse.list_jobs_v1($1, $2, $3, $4, $5)', [
      queue,
      type,
      states,
      limit,
      before,
    ]);
    const last = rows[rows.length - 1];
    return {
      items: rows.map(toSnapshot),
      nextCursor: rows.length === limit && last.seq !== null ? encodeCursor('jobs', last.seq) : null,
    };
  }

  /**
   * Cancels a job: at once if it is not running; otherwise its worker is told to stop (the
   * handler's `ctx.signal` aborts) and the job ends `canceled` when the worker acknowledges.
   */
  async cancel(jobId: string, options: { reason?: string } = {}, client?: Queryable): Promise<CancelResult> {
    checkJobId(jobId);
    if (options.reason !== undefined && (typeof options.reason !== 'string' || options.reason.length > 1000)) {
      throw new WorkhorseValidationError('reason', 'must be a string of at most 1000 characters');
    }
    const rows = await this.run<{ status: CancelResult }>(client, 'SELECT workhorse.cancel_v1($1, $2) AS status', [
      jobId,
      options.reason ?? null,
    ]);
    return rows[0].status;
  }

  private async run<R>(client: Queryable | undefined, text: string, values: unknown[]): Promise<R[]> {
    try {
      const result = await (client ?? this.pool).query(text, values);
      return result.rows as R[];
    } catch (error) {
      throw fromPgError(error);
    }
  }
}
