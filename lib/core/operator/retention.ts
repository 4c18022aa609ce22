import { callOne } from '../protocol/call';
import { RETENTION_RUN, RETENTION_STATUS, SET_RETENTION } from '../protocol/admin';
import type { Queryable } from '../types';

/**
 * How long history and finished jobs are kept (docs/operations.md#retention). History goes by
 * whole UTC days; a finished job goes with its outcome, query row, checkpoints, waits and redrive
 * lineage once it finished longer ago than `finishedJobMs`, unless a live job still references it.
 */
export interface RetentionPolicy {
  /** Applied by the maintenance tick (default true); `runRetention` works either way only when true. */
  enabled: boolean;
  /** Days of job events kept (default 14). */
  jobEventDays: number;
  /** Days of closed attempts kept (default 14). */
  attemptHistoryDays: number;
  /** How long a finished job is kept after it finished, ms (default 30 days; at least 1000). */
  finishedJobMs: number;
}

/** `admin.retentionStatus()`: the policy and how far retention got. */
export interface RetentionStatus {
  /** `changedBy`: the caller-chosen actor of the last change; `loginRole`: its login role (`session_user`; null before the schema recorded it). */
  policy: RetentionPolicy & { changedAt: Date | null; changedBy: string | null; loginRole: string | null };
  lastRunAt: Date | null;
  /** Every job created before this time has been looked at. */
  coveredUntil: Date | null;
  /** How far `coveredUntil` is behind the window's start, ms (null before the first run). */
  lagMs: number | null;
  /** Jobs passed over for now (live, finished too recently, still referenced), to be looked at again. */
  deferredJobs: number;
  jobsPurged: number;
  partitionsDropped: number;
  /** Partition drops that gave up waiting for their lock (tried again later). */
  lockTimeouts: number;
  oldestJobEventDay: string | null;
  oldestAttemptHistoryDay: string | null;
  /** History partitions past their window still there (dropped at the next runs). */
  expiredPartitions: number;
}

/** What one retention pass did (`admin.runRetention()`). */
export interface RetentionRun {
  /** Another pass was running (or the policy is disabled: `disabled`). */
  skipped: boolean;
  disabled?: boolean;
  jobsPurged?: number;
  jobsExamined?: number;
  partitionsDropped?: number;
  lockTimeouts?: number;
  /** The budget ran out with work left. */
  more?: boolean;
}

async function one<T>(db: Queryable, statement: string, values: unknown[]): Promise<T> {
  return (await callOne<{ value: T }>(db, statement, values)).value;
}

const dateOrNull = (value: unknown): Date | null => (typeof value === 'string' ? new Date(value) : null);

export async function retentionStatus(db: Queryable): Promise<RetentionStatus> {
  type Wire = Omit<RetentionStatus, 'policy' | 'lastRunAt' | 'coveredUntil'> & {
    policy: RetentionPolicy & { changedAt: string | null; changedBy: string | null; loginRole: string | null };
    lastRunAt: string | null;
    coveredUntil: string | null;
  };
  const wire = await one<Wire>(db, RETENTION_STATUS, []);
  return {
    ...wire,
    policy: { ...wire.policy, changedAt: dateOrNull(wire.policy.changedAt) },
    lastRunAt: dateOrNull(wire.lastRunAt),
    coveredUntil: dateOrNull(wire.coveredUntil),
  };
}

export function runRetention(db: Queryable, budget: number): Promise<RetentionRun> {
  return one<RetentionRun>(db, RETENTION_RUN, [budget]);
}

export async function setRetention(db: Queryable, policy: Partial<RetentionPolicy>, actor: string | null): Promise<void> {
  await one<null>(db, SET_RETENTION, [JSON.stringify(policy), actor]);
}
