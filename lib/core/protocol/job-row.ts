import type { ErrorEnvelope, JobSnapshot, JobState, JsonValue, RetryPolicy } from '../types';

/** A row of the `workhorse.job_snapshot` view, as the read functions return it. */
export interface JobRow {
  id: string;
  queue: string;
  type: string;
  payload: JsonValue;
  priority: number;
  max_attempts: number;
  retry_policy: RetryPolicy | null;
  deadline: Date | null;
  execution_timeout_ms: number | null;
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
  progress: JsonValue | null;
  redriven_from: string | null;
  redriven_to: string[];
  seq: string;
  concurrency_key: string | null;
}

/** A job's row as the public snapshot. */
export function toSnapshot(row: JobRow): JobSnapshot {
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
    deadline: row.deadline,
    executionTimeoutMs: row.execution_timeout_ms,
    runAt: row.run_at,
    createdAt: row.created_at,
    finishedAt: row.finished_at,
    result: row.result,
    error: row.error,
    workerId: row.worker_id,
    leaseExpiresAt: row.lease_expires_at,
    cancelRequestedAt: row.cancel_requested_at,
    progress: row.progress,
    redrivenFrom: row.redriven_from,
    redrivenTo: row.redriven_to,
    concurrencyKey: row.concurrency_key ?? null,
  };
}
