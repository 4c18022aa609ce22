import { WorkhorseValidationError } from '../errors';
import { callOne } from '../protocol/call';
import { HEALTH } from '../protocol/admin';
import type { Queryable } from '../types';

/** How healthy the queue is: the worst level among the reasons. */
export type HealthStatus = 'ok' | 'warn' | 'critical';

/**
 * Why the status is not `ok` (see docs/operations.md for what each means and what to do):
 * a queue's oldest ready job waited long (`oldest_ready_age`), leases ran out and were not
 * recovered (`expired_leases`), jobs failed for good in the last hour (`dead_letters`),
 * retention is behind (`retention_lag`), ready jobs but no running worker registered
 * (`ready_without_workers`), today's or tomorrow's history partitions are missing
 * (`partitions_missing`), no maintenance tick finished for too long (`maintenance_stale`), an
 * enabled retention did not run for too long (`retention_stale`).
 */
export type HealthReasonCode =
  | 'oldest_ready_age'
  | 'expired_leases'
  | 'dead_letters'
  | 'retention_lag'
  | 'ready_without_workers'
  | 'partitions_missing'
  | 'maintenance_stale'
  | 'retention_stale';

export interface HealthReason {
  code: HealthReasonCode;
  level: 'warn' | 'critical';
  /** The queue it concerns, or null for the whole database. */
  queue: string | null;
  /** The measured value (ms, or a count). */
  value: number;
  /** The threshold it reached. */
  threshold: number;
}

/** A level pair: the value at which a reason turns `warn`, and `critical`; null: never. */
export interface ThresholdPair {
  warn?: number | null;
  critical?: number | null;
}

/** Thresholds of `admin.health()`; each one left out keeps its default (docs/operations.md). */
export interface HealthThresholds {
  /** Wait of a queue's oldest ready job, ms (default warn 60 000, critical 600 000). */
  oldestReadyMs?: ThresholdPair;
  /** Active jobs whose lease ran out over 10 s ago, per queue (default warn 1, critical 100). */
  expiredLeases?: ThresholdPair;
  /** Jobs of a queue that failed for good in the last hour (default warn 10, critical 100). */
  failedLastHour?: ThresholdPair;
  /** How far retention is behind its window, ms (default warn 1 day, critical 7 days). */
  retentionLagMs?: ThresholdPair;
  /** Ready jobs while no worker is registered as running (default warn 1, critical never). */
  readyWithoutWorkers?: ThresholdPair;
  /**
   * Time since the last maintenance tick, and since the last retention pass when retention is
   * enabled, ms (default warn 60 000, critical 900 000: sixty ticks at the default `tickMs` of
   * 1 s; raise it with a longer `tickMs`).
   */
  maintenanceStaleMs?: ThresholdPair;
}

export interface QueueHealth {
  queue: string;
  blocked: number;
  scheduled: number;
  ready: number;
  active: number;
  /** How long its oldest ready job has waited, ms (0 with none ready). */
  oldestReadyMs: number;
  expiredLeases: number;
  failedLastHour: number;
}

/** `admin.health()`: one consistent snapshot, read by one statement. */
export interface HealthReport {
  status: HealthStatus;
  checkedAt: Date;
  /** The reasons for the status, critical ones first. Empty when `ok`. */
  reasons: HealthReason[];
  queues: QueueHealth[];
  workers: { running: number; draining: number; gone: number };
  retention: { enabled: boolean; lagMs: number | null };
  /** Today's and tomorrow's history partitions that do not exist. */
  missingPartitions: string[];
  /**
   * When a maintenance tick last finished its work, and a retention pass (null: never since the
   * installation or upgrade that started recording it).
   */
  maintenance: { tickLastRunAt: Date | null; retentionLastRunAt: Date | null };
}

const THRESHOLD_KEYS = [
  'oldestReadyMs',
  'expiredLeases',
  'failedLastHour',
  'retentionLagMs',
  'readyWithoutWorkers',
  'maintenanceStaleMs',
] as const satisfies readonly (keyof HealthThresholds)[];
type MissingKey = Exclude<keyof HealthThresholds, (typeof THRESHOLD_KEYS)[number]>;
const everyKeyListed: [MissingKey] extends [never] ? true : MissingKey = true;
void everyKeyListed;

/** Checks thresholds, naming the first bad field (`thresholds.oldestReadyMs.warn`). */
export function checkHealthThresholds(thresholds: unknown): HealthThresholds {
  const fail = (field: string, message: string): never => {
    throw new WorkhorseValidationError(field, message);
  };
  if (typeof thresholds !== 'object' || thresholds === null || Array.isArray(thresholds)) fail('thresholds', 'must be an object');
  for (const [key, pair] of Object.entries(thresholds as Record<string, unknown>)) {
    if (!(THRESHOLD_KEYS as readonly string[]).includes(key)) fail(`thresholds.${key}`, `is not a health threshold (${THRESHOLD_KEYS.join(', ')})`);
    if (typeof pair !== 'object' || pair === null || Array.isArray(pair)) fail(`thresholds.${key}`, 'must be an object { warn, critical }');
    for (const [level, value] of Object.entries(pair as Record<string, unknown>)) {
      if (level !== 'warn' && level !== 'critical') fail(`thresholds.${key}.${level}`, 'is not a level (warn, critical)');
      if (value !== null && (typeof value !== 'number' || !Number.isFinite(value) || value < 0)) {
        fail(`thresholds.${key}.${level}`, 'must be a number of at least 0, or null (never)');
      }
    }
  }
  return thresholds as HealthThresholds;
}

interface HealthRow extends Omit<HealthReport, 'checkedAt' | 'maintenance'> {
  checkedAt: string;
  maintenance: { tickLastRunAt: string | null; retentionLastRunAt: string | null };
}

const dateOrNull = (value: string | null): Date | null => (value === null ? null : new Date(value));

/** One `health_v1` statement; `thresholds` are merged over the defaults level by level (in SQL). */
export async function health(db: Queryable, thresholds: HealthThresholds): Promise<HealthReport> {
  const row = (await callOne<{ health: HealthRow }>(db, HEALTH, [JSON.stringify(thresholds)])).health;
  const { tickLastRunAt, retentionLastRunAt } = row.maintenance;
  return {
    ...row,
    checkedAt: new Date(row.checkedAt),
    maintenance: { tickLastRunAt: dateOrNull(tickLastRunAt), retentionLastRunAt: dateOrNull(retentionLastRunAt) },
  };
}
