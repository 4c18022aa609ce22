import { WorkhorseValidationError } from '../errors';
import { call } from '../protocol/call';
import { LIST_SCHEDULES, PAUSE_SCHEDULE, RESUME_SCHEDULE, SCHEDULE_HISTORY, TRIGGER_SCHEDULE } from '../protocol/admin';
import type { JobState, JsonValue, Queryable } from '../types';
import { actorOf } from '../actor-options';
import { checkParamInteger, checkParamText } from '../validation';
import type {
  ScheduleActionOptions,
  ScheduleHistoryChange,
  ScheduleHistoryEntry,
  ScheduleInfo,
  ScheduleState,
  StoredScheduleDefinition,
} from './types';

/**
 * The operator side of schedules, as `Admin` offers it: each function checks its input, calls
 * one `workhorse.*_v1` function on the given connection and maps the answer.
 */

/** The namespace of schedules that name none (and of the Nest module's, unless configured). */
export const DEFAULT_SCHEDULE_NAMESPACE = 'default';

interface ScheduleRow {
  namespace: string;
  key: string;
  definition: StoredScheduleDefinition;
  state: ScheduleState;
  revision: number;
  created_at: Date;
  updated_at: Date;
  paused_at: Date | null;
  paused_by: string | null;
  pause_reason: string | null;
  next_run_at: Date | null;
  last_run_at: Date | null;
  last_job_id: string | null;
  last_job_state: JobState | null;
  planned_through: Date;
  last_error: string | null;
  last_error_at: Date | null;
}

interface HistoryRow {
  revision: number;
  at: Date;
  change: ScheduleHistoryChange;
  definition: StoredScheduleDefinition | null;
  actor: string | null;
  login_role: string | null;
  reason: string | null;
  job_id: string | null;
}

const toInfo = (row: ScheduleRow): ScheduleInfo => ({
  namespace: row.namespace,
  key: row.key,
  ...row.definition,
  payload: row.definition.payload as JsonValue,
  state: row.state,
  revision: row.revision,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  pausedAt: row.paused_at,
  pausedBy: row.paused_by,
  pauseReason: row.pause_reason,
  nextRunAt: row.next_run_at,
  lastRunAt: row.last_run_at,
  lastJobId: row.last_job_id,
  lastJobState: row.last_job_state,
  plannedThrough: row.planned_through,
  lastError: row.last_error,
  lastErrorAt: row.last_error_at,
});

function checkAction(key: string, options: ScheduleActionOptions): { namespace: string; actor: string | null; reason: string | null } {
  if (typeof options !== 'object' || options === null) throw new WorkhorseValidationError('options', 'must be an object');
  for (const name of Object.keys(options)) {
    if (!['namespace', 'actor', 'reason'].includes(name)) {
      throw new WorkhorseValidationError(name, 'is not an option of a schedule action (namespace, actor, reason)');
    }
  }
  // (Names, actor and reason are bounded by the SQL functions: check_name, check_actor.)
  checkParamText(key, 'key');
  const namespace = checkParamText(options.namespace ?? DEFAULT_SCHEDULE_NAMESPACE, 'namespace');
  const [actor, reason] = actorOf(options);
  return { namespace, actor, reason };
}

export async function listSchedules(db: Queryable, namespace?: string): Promise<ScheduleInfo[]> {
  const checked = namespace === undefined ? null : checkParamText(namespace, 'namespace');
  const rows = await call<ScheduleRow>(db, LIST_SCHEDULES, [checked]);
  return rows.map(toInfo);
}

export async function getScheduleHistory(db: Queryable, key: string, options: { namespace?: string; limit?: number }): Promise<ScheduleHistoryEntry[]> {
  const namespace = checkParamText(options.namespace ?? DEFAULT_SCHEDULE_NAMESPACE, 'namespace');
  checkParamText(key, 'key');
  const limit = options.limit === undefined ? 100 : checkParamInteger(options.limit, 'limit');
  const rows = await call<HistoryRow>(db, SCHEDULE_HISTORY, [namespace, key, limit]);
  return rows.map((row) => ({
    revision: row.revision,
    at: row.at,
    change: row.change,
    definition: row.definition,
    actor: row.actor,
    loginRole: row.login_role,
    reason: row.reason,
    jobId: row.job_id,
  }));
}

/** Pauses or resumes (`fn`); returns whether the schedule changed. */
export async function setSchedulePaused(db: Queryable, pause: boolean, key: string, options: ScheduleActionOptions): Promise<boolean> {
  const { namespace, actor, reason } = checkAction(key, options);
  const rows = await call<{ changed: boolean }>(db, pause ? PAUSE_SCHEDULE : RESUME_SCHEDULE, [namespace, key, actor, reason]);
  return rows[0].changed;
}

export async function triggerSchedule(db: Queryable, key: string, options: ScheduleActionOptions): Promise<string> {
  const { namespace, actor, reason } = checkAction(key, options);
  const rows = await call<{ job_id: string }>(db, TRIGGER_SCHEDULE, [namespace, key, actor, reason]);
  return rows[0].job_id;
}
