import type { Pool, PoolClient } from 'pg';
import { fromPgError } from './errors';
import type { TraceContext } from '../telemetry/trace-context';
import type { ErrorEnvelope, JsonValue, RetryPolicy } from '../types';
import type { LeaseOf } from '../worker/heartbeater';
import type { WorkerSettings } from '../worker/worker-options';

/**
 * The hot path's statement, with the columns the worker uses (a lease time would only cost
 * parsing). complete_and_claim_v1 answers every completion, in the order sent, and then the
 * claimed jobs; the completions that succeeded (nearly all of them) are left out here, so only
 * the others (`canceled`, `stale`) come back, each with its job id: a row that would say
 * `succeeded` costs the server its output and the worker its parsing, and says nothing.
 */
const ROUND_TRIP_SQL =
  'SELECT job_id, status, queue, type, payload, attempt, max_attempts, fence_token, execution_timeout_ms, checkpoints, waits, trace_context ' +
  "FROM workhorse.complete_and_claim_v1($1, $2::jsonb, $3, $4, $5) WHERE status <> 'succeeded'";
/** Name of ROUND_TRIP_SQL as a prepared statement (parsed and planned once per connection). */
const ROUND_TRIP_STATEMENT = 'workhorse.complete_and_claim_v1';

/**
 * The most jobs one round trip claims, and the most completions it records (the limits of
 * complete_and_claim_v1). `concurrency` is at most 1000 too, so one round can always fill every
 * free slot of a lane: at high concurrency, large rounds share the statement's fixed cost (and
 * the commit) among more jobs. See docs/decisions.md.
 */
export const MAX_ROUND = 1000;

/**
 * A row of the round trip, in its column order: a completion's status, or (status `claimed`) a
 * claimed job. Rows arrive as arrays (`rowMode: 'array'`): a round trip returns a row per
 * completion and per claimed job, and an array is cheaper to build than an object with a
 * property per column.
 */
export type RoundTripRow = [
  jobId: string,
  status: string,
  queue: string,
  type: string,
  payload: JsonValue,
  attempt: number,
  maxAttempts: number,
  fenceToken: string,
  executionTimeoutMs: number | null,
  checkpoints: Record<string, [] | [JsonValue]> | null,
  /** The `waits` column: wake times of the job's durable sleeps (not signal or human waits). */
  sleeps: Record<string, string> | null,
  traceContext: TraceContext | null,
];

/** What `fail_v1` answered. */
export interface FailAnswer {
  status: string;
  runAt: Date | null;
  delayMs: number;
}

/** `fail_v1`'s options. */
export interface FailOptions {
  retryDelayMs?: number;
  nonRetryable?: boolean;
  attemptOutcome?: 'timeout';
  retryPolicy?: RetryPolicy;
}

/**
 * A named prepared statement that the server connection does not have (26000) or already has
 * (42P05): what a pooler in transaction mode that does not track prepared statements (PgBouncer
 * before 1.21, or without max_prepared_statements) answers, when consecutive statements of one
 * client reach different server connections. Nothing ran; the statement can be sent again unnamed.
 */
function isPreparedStatementMismatch(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '26000' || code === '42P05';
}

/**
 * The statements a worker sends as the owner of its jobs (each carries its worker id and the
 * job's fence token): the round trip that records completions and claims, and the single-job
 * failure, release, cancel acknowledgement and transactional completion. Errors of the
 * protocol's own come back typed (`fromPgError`).
 */
export class OwnerStatements {
  /** False once the connection path refused a prepared statement (see isPreparedStatementMismatch). */
  private prepare = true;

  constructor(
    private readonly pool: Pool,
    private readonly settings: WorkerSettings,
  ) {}

  /**
   * One `complete_and_claim_v1` round trip: records `items` (JSON text of
   * `[{"jobId", "fence", "result"}]`) and claims up to `limit` jobs from `queues` (a group's). Prepared once per connection
   * where the path allows; a connection that refuses the prepared statement ran nothing, so the
   * same round trip is sent again unprepared, and so are all later ones.
   */
  async roundTrip(items: string, limit: number, queues: readonly string[]): Promise<RoundTripRow[]> {
    const { workerId, leaseMs } = this.settings;
    const values = [workerId, items, queues, limit, leaseMs];
    if (this.prepare) {
      try {
        return (await this.pool.query<RoundTripRow>({ name: ROUND_TRIP_STATEMENT, text: ROUND_TRIP_SQL, values, rowMode: 'array' })).rows;
      } catch (error) {
        if (!isPreparedStatementMismatch(error)) throw error;
        this.prepare = false;
      }
    }
    return (await this.pool.query<RoundTripRow>({ text: ROUND_TRIP_SQL, values, rowMode: 'array' })).rows;
  }

  /** Records a failed attempt: `retry_scheduled`, `failed`, `canceled` or `stale`. */
  async fail(job: LeaseOf, error: ErrorEnvelope, options: FailOptions): Promise<FailAnswer> {
    try {
      const result = await this.pool.query<{ status: string; run_at: Date | null; delay_ms: string | null }>(
        'SELECT status, run_at, delay_ms FROM workhorse.fail_v1($1, $2, $3, $4::jsonb, $5::jsonb)',
        [job.jobId, this.settings.workerId, job.fenceToken, JSON.stringify(error), JSON.stringify(options)],
      );
      const row = result.rows[0];
      return { status: row.status, runAt: row.run_at, delayMs: Number(row.delay_ms) };
    } catch (e) {
      throw fromPgError(e);
    }
  }

  /** Hands a job back without using its attempt: `released`, `canceled` or `stale`. */
  release(job: LeaseOf, reason: string): Promise<string> {
    return this.status('SELECT workhorse.release_v1($1, $2, $3, $4, $5) AS status', [
      job.jobId,
      this.settings.workerId,
      job.fenceToken,
      this.settings.unknownTypeDelayMs,
      reason,
    ]);
  }

  /** Confirms that the worker stopped a job whose cancellation was requested: `canceled`, `not_requested` or `stale`. */
  acknowledgeCancel(job: LeaseOf): Promise<string> {
    return this.status('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3) AS status', [job.jobId, this.settings.workerId, job.fenceToken]);
  }

  /** Records a success inside a transactional handler's own transaction: `succeeded`, `canceled` or `stale`. */
  async completeIn(client: PoolClient, job: LeaseOf, resultText: string): Promise<string> {
    const result = await client.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status', [
      job.jobId,
      this.settings.workerId,
      job.fenceToken,
      resultText,
    ]);
    return result.rows[0].status;
  }

  private async status(text: string, values: unknown[]): Promise<string> {
    try {
      const result = await this.pool.query<{ status: string }>(text, values);
      return result.rows[0].status;
    } catch (error) {
      throw fromPgError(error);
    }
  }
}
