import type { EnqueueOptions, JobState, JsonValue } from '../types';

/**
 * What happens to occurrences that no tick fired within `missedAfterMs` of their time (every
 * worker was down): `skip` them (default), fire only the `latest`, or fire `all` of them, the
 * most recent `catchUpLimit` at most.
 */
export type CatchUpMode = 'skip' | 'latest' | 'all';

/** `allow` (default): every occurrence enqueues a job. `skip`: not while the schedule's previous job is still live. */
export type OverlapMode = 'allow' | 'skip';

/** The enqueue options of the jobs a schedule enqueues. */
export type ScheduleJobOptions = Pick<EnqueueOptions, 'queue' | 'priority' | 'maxAttempts' | 'retryPolicy' | 'tags' | 'executionTimeoutMs'>;

/**
 * One schedule of a namespace, as `queue.syncSchedules` takes it: enqueue a job of `type` with
 * `payload` at each occurrence of `cron` in `timezone`.
 *
 * @example
 * const nightly: ScheduleDefinition = {
 *   key: 'reports.nightly',
 *   type: 'report.daily',
 *   cron: '0 6 * * *',
 *   timezone: 'Europe/Berlin',
 *   payload: { format: 'pdf' },
 *   options: { queue: 'reports' },
 * };
 */
export interface ScheduleDefinition {
  /** Names the schedule within its namespace: letters, digits and `. _ : / -`, at most 128 characters. */
  key: string;
  /** The job type each occurrence enqueues. */
  type: string;
  /**
   * 5 fields (minute hour day-of-month month day-of-week), 6 (seconds first) or a macro
   * (`@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`). Read by the server (docs/schedules.md), which refuses an invalid one at the sync.
   */
  cron: string;
  /** IANA time zone the expression is read in, default `UTC`. */
  timezone?: string;
  /** The payload of each job (JSON), default `{}`. */
  payload?: unknown;
  /** Enqueue options of each job. */
  options?: ScheduleJobOptions;
  /** Default `skip`. */
  catchUp?: CatchUpMode;
  /** With `catchUp: 'all'`, the most missed occurrences fired after an outage, 1 to 1000 (default 100). */
  catchUpLimit?: number;
  /** Default `allow`. */
  overlap?: OverlapMode;
  /**
   * An occurrence not fired within this long after its time counts as missed and is left to the
   * catch-up mode: 1 000 to 86 400 000 ms, default 60 000.
   */
  missedAfterMs?: number;
}

/** A definition as stored: every default filled in. */
export interface StoredScheduleDefinition {
  type: string;
  cron: string;
  timezone: string;
  payload: JsonValue;
  options: ScheduleJobOptions;
  catchUp: CatchUpMode;
  catchUpLimit: number;
  overlap: OverlapMode;
  missedAfterMs: number;
}

/** What a sync did to one schedule. */
export type ScheduleSyncChange = 'created' | 'updated' | 'unchanged' | 'enabled' | 'disabled';

export interface SyncedSchedule {
  key: string;
  change: ScheduleSyncChange;
  /** The schedule's revision after the sync. */
  revision: number;
}

/** `disabled`: a sync of its namespace no longer lists it. `paused`: an operator paused it. */
export type ScheduleState = 'active' | 'paused' | 'disabled';

/** What `Admin.listSchedules` reports about one schedule. */
export interface ScheduleInfo extends StoredScheduleDefinition {
  namespace: string;
  key: string;
  state: ScheduleState;
  revision: number;
  createdAt: Date;
  updatedAt: Date;
  pausedAt: Date | null;
  pausedBy: string | null;
  pauseReason: string | null;
  /** The next planned occurrence (null unless active). */
  nextRunAt: Date | null;
  /** The time of the occurrence (or trigger) that enqueued the last job. */
  lastRunAt: Date | null;
  lastJobId: string | null;
  /** The last job's state now (null when its history is gone or there is none). */
  lastJobState: JobState | null;
  /** How far the server has planned occurrences (see docs/schedules.md). */
  plannedThrough: Date;
  /** The last failure to enqueue an occurrence's job, until an occurrence enqueues again. */
  lastError: string | null;
  lastErrorAt: Date | null;
}

/** A change recorded in a schedule's history: a new revision, or a trigger. */
export type ScheduleHistoryChange = 'created' | 'updated' | 'disabled' | 'enabled' | 'paused' | 'resumed' | 'triggered';

export interface ScheduleHistoryEntry {
  revision: number;
  at: Date;
  change: ScheduleHistoryChange;
  /** The definition from this revision on (`created`, `updated`, `enabled`). */
  definition: StoredScheduleDefinition | null;
  /** Who made the change: the caller-chosen actor. */
  actor: string | null;
  /** The login role (`session_user`) of the session that made it; null before the schema recorded it. */
  loginRole: string | null;
  reason: string | null;
  /** The job a trigger enqueued. */
  jobId: string | null;
}

/** Which schedule an operator action is about: its namespace (default `default`) and who acts, why. */
export interface ScheduleActionOptions {
  namespace?: string;
  actor?: string;
  reason?: string;
}
