/**
 * Owner calls of the SQL protocol made by hand, the way a worker makes them: claim jobs, then
 * complete or fail them under the claim's fence. For tests of the protocol itself, and for tests
 * that need a job in a given state without running a worker.
 */
import type { Pool, PoolClient } from 'pg';

type Runner = Pool | PoolClient;

/** A job claimed through `claim_many_v1`: its row, and the worker that claimed it. */
export interface ClaimedJob {
  jobId: string;
  /** The worker id the claim was made with; owner calls of `complete` and `fail` send it. */
  workerId: string;
  /** The fence token, as node-postgres returns a bigint: a decimal string. */
  fence: string;
  attempt: number;
  maxAttempts: number;
  queue: string;
  type: string;
  payload: unknown;
  leaseExpiresAt: Date;
  executionTimeoutMs: number | null;
  checkpoints: Record<string, unknown> | null;
  waits: Record<string, string> | null;
}

export interface ClaimOptions {
  /** Default `test-worker`. */
  workerId?: string;
  /** Default 60 s: long enough that a lease only lapses when a test makes it (see forceExpire). */
  leaseMs?: number;
  /** How many jobs `claim` asks for (default 1). */
  limit?: number;
}

interface ClaimRow {
  job_id: string;
  fence_token: string;
  attempt: number;
  max_attempts: number;
  queue: string;
  type: string;
  payload: unknown;
  lease_expires_at: Date;
  execution_timeout_ms: number | null;
  checkpoints: Record<string, unknown> | null;
  waits: Record<string, string> | null;
}

/**
 * Claims up to `limit` jobs of `queues` as worker `workerId`, in claim order; empty when none is
 * ready.
 *
 *     const [first, second] = await claim(db.pool, ['a', 'b'], { limit: 2, workerId: 'w1' });
 */
export async function claim(runner: Runner, queues: string | string[], options: ClaimOptions = {}): Promise<ClaimedJob[]> {
  const workerId = options.workerId ?? 'test-worker';
  const { rows } = await runner.query<ClaimRow>('SELECT * FROM workhorse.claim_many_v1($1::text[], $2, $3, $4)', [
    typeof queues === 'string' ? [queues] : queues,
    workerId,
    options.limit ?? 1,
    options.leaseMs ?? 60_000,
  ]);
  return rows.map((row) => ({
    jobId: row.job_id,
    workerId,
    fence: row.fence_token,
    attempt: row.attempt,
    maxAttempts: row.max_attempts,
    queue: row.queue,
    type: row.type,
    payload: row.payload,
    leaseExpiresAt: row.lease_expires_at,
    executionTimeoutMs: row.execution_timeout_ms,
    checkpoints: row.checkpoints,
    waits: row.waits,
  }));
}

/**
 * Claims the one ready job of `queue` and fails the test unless there was exactly one. Every
 * test claims by hand through this function (or `claim`), with this argument order:
 *
 *     const job = await claimOne(db.pool, 'emails', { workerId: 'worker-A', leaseMs: 1000 });
 */
export async function claimOne(runner: Runner, queue: string, options: Omit<ClaimOptions, 'limit'> = {}): Promise<ClaimedJob> {
  const claimed = await claim(runner, queue, options);
  if (claimed.length !== 1) throw new Error(`expected to claim one job of queue ${queue}, claimed ${claimed.length}`);
  return claimed[0];
}

/** Who owns a job: what every owner call sends. */
export type Owner = Pick<ClaimedJob, 'jobId' | 'workerId' | 'fence'>;

/** Completes the job with `result` through `complete_v1`; returns its status (`succeeded`, `stale`, ...). */
export async function complete(runner: Runner, owner: Owner, result: unknown = null): Promise<string> {
  const { rows } = await runner.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status', [
    owner.jobId,
    owner.workerId,
    owner.fence,
    JSON.stringify(result),
  ]);
  return rows[0].status;
}

/** What `fail_v1` answers: the status, and when and why a retry runs. */
export interface FailRow {
  status: string;
  run_at: Date | null;
  delay_ms: string | null;
  delay_source: string | null;
}

/** Fails the attempt with the error envelope `error` and fail `options` through `fail_v1`. */
export async function fail(runner: Runner, owner: Owner, error: object, options: object = {}): Promise<FailRow> {
  const { rows } = await runner.query<FailRow>('SELECT * FROM workhorse.fail_v1($1, $2, $3, $4::jsonb, $5::jsonb)', [
    owner.jobId,
    owner.workerId,
    owner.fence,
    JSON.stringify(error),
    JSON.stringify(options),
  ]);
  return rows[0];
}

/**
 * Pushes an active job's lease into the past. For tests about what the protocol does with an
 * expired lease, not about how long a lease lasts: they need not wait for the clock.
 */
export async function forceExpire(runner: Runner, jobId: string): Promise<void> {
  const result = await runner.query(
    "UPDATE workhorse.job_runtime SET lease_expires_at = clock_timestamp() - interval '1 second' WHERE job_id = $1 AND state = 'active'",
    [jobId],
  );
  if (result.rowCount !== 1) throw new Error(`job ${jobId} is not active: there is no lease to expire`);
}
