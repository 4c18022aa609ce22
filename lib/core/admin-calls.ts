import type { Pool } from 'pg';
import { ACTOR_KEYS, actorOf } from './actor-options';
import { applyConnectTimeout } from './connect-timeout';
import { WorkhorseValidationError } from './errors';
import { checkHealthThresholds, health, type HealthReport, type HealthThresholds } from './operator/health';
import { errorGroups, findJobs, jobDurations, jobTimings, type ErrorGroup, type FindJobsFilter, type JobDuration, type TimingStats } from './operator/job-insights';
import { drainWorker, listWorkers, type DrainResult, type WorkerInfo } from './operator/live-workers';
import { listOperatorChanges, type OperatorChange, type OperatorChangeFilter } from './operator/operator-changes';
import { retentionStatus, runRetention, setRetention, type RetentionPolicy, type RetentionRun, type RetentionStatus } from './operator/retention';
import { getScheduleHistory, listSchedules, setSchedulePaused, triggerSchedule } from './schedules/admin-calls';
import type { ScheduleActionOptions, ScheduleHistoryEntry, ScheduleInfo } from './schedules/types';
import type { ActorOptions, JobSnapshot, Page, Queryable } from './types';
import { checkDate, checkJobId, checkOptions, checkParamInteger, checkParamText } from './validation';

/**
 * The part of {@link Admin} that operates the deployment rather than single jobs: live workers
 * and their drain, health, retention, and cron schedules. Every method takes an optional client
 * as its last argument, so calls can join a transaction; by default the pool is used.
 */
export abstract class AdminCalls {
  constructor(readonly pool: Pool) {
    applyConnectTimeout(pool);
  }

  /**
   * The workers in the registry of live workers, newest first: where each runs, what it claims
   * from, how many jobs it holds, and its status (`running`, `draining`, `drained`, `gone`).
   *
   * @example
   * const stuck = (await admin.listWorkers()).filter((w) => w.status === 'gone');
   */
  async listWorkers(client?: Queryable): Promise<WorkerInfo[]> {
    return listWorkers(this.runner(client));
  }

  /**
   * Asks a worker to drain: at its next report (within its heartbeat interval) it stops
   * claiming and finishes the jobs it holds; `listWorkers` then shows it `drained`, and its
   * process can be stopped without abandoning work.
   *
   * @example
   * await admin.drainWorker('web-1:4242:9f3a0c1e', { actor: 'alice', reason: 'host maintenance' });
   */
  async drainWorker(workerId: string, options: ActorOptions = {}, client?: Queryable): Promise<DrainResult> {
    checkParamText(workerId, 'workerId');
    const [actor, reason] = actorOf(checkOptions(options, 'options', ACTOR_KEYS, 'a drain option'));
    return drainWorker(this.runner(client), workerId, actor, reason);
  }

  /**
   * One consistent snapshot of the queue's health, read by one statement: per queue the live
   * jobs by state, the oldest ready job's wait, expired leases not yet recovered and dead letters
   * of the last hour; live workers; retention lag; missing history partitions; and a status
   * (`ok`, `warn`, `critical`) with the reasons for it. Thresholds left out keep their defaults
   * (docs/operations.md lists them, and what to do about each reason).
   *
   * @example
   * const { status, reasons } = await admin.health({ oldestReadyMs: { warn: 5_000, critical: 60_000 } });
   */
  async health(thresholds: HealthThresholds = {}, client?: Queryable): Promise<HealthReport> {
    return health(this.runner(client), checkHealthThresholds(thresholds));
  }

  /**
   * Operator changes of the settings kept in place (queue pause and resume, queue policies, drain
   * requests, the retention policy), newest first: each with the caller-chosen actor and reason
   * and the login role (`session_user`) of the session that made it. Page with `beforeId` (the
   * last row's id).
   *
   * @example
   * const [last] = await admin.listOperatorChanges({ kind: 'queue_paused', subject: 'billing', limit: 1 });
   */
  async listOperatorChanges(filter: OperatorChangeFilter = {}, client?: Queryable): Promise<OperatorChange[]> {
    const checked = checkOptions(filter, 'filter', ['kind', 'subject', 'limit', 'beforeId'], 'an operator-change filter');
    return listOperatorChanges(this.runner(client), checked);
  }

  /** The retention policy and how far retention got (see docs/operations.md#retention). */
  async retentionStatus(client?: Queryable): Promise<RetentionStatus> {
    return retentionStatus(this.runner(client));
  }

  /**
   * Sets the retention policy; settings left out keep their values. The maintenance tick applies
   * it from its next pass.
   *
   * @example
   * await admin.setRetention({ finishedJobMs: 7 * 86_400_000, jobEventDays: 7 }, { actor: 'alice' });
   */
  async setRetention(policy: Partial<RetentionPolicy>, options: Pick<ActorOptions, 'actor'> = {}, client?: Queryable): Promise<void> {
    const [actor] = actorOf(checkOptions(options, 'options', ['actor'], 'an option of setRetention'));
    return setRetention(this.runner(client), policy, actor);
  }

  /**
   * One retention pass now (the maintenance tick runs one per tick anyway): drops expired
   * history partitions and looks at up to `budget` jobs (default 10 000, at most 1 000 000),
   * removing those whose window has passed. Answers `skipped` when another pass runs.
   */
  async runRetention(options: { budget?: number } = {}, client?: Queryable): Promise<RetentionRun> {
    const { budget } = checkOptions(options, 'options', ['budget'], 'an option of runRetention');
    return runRetention(this.runner(client), checkParamInteger(budget ?? 10_000, 'budget'));
  }

  /**
   * Schedules (all namespaces, or `namespace`'s), by namespace and key: definition, state
   * (`active`, `paused`, `disabled`), revision, next and last run, the last job and its state.
   */
  async listSchedules(options: { namespace?: string } = {}, client?: Queryable): Promise<ScheduleInfo[]> {
    return listSchedules(this.runner(client), checkOptions(options, 'options', ['namespace'], 'a schedule-list option').namespace);
  }

  /** A schedule's history, newest first: each revision's change and each trigger (default 100 entries). */
  async getScheduleHistory(key: string, options: { namespace?: string; limit?: number } = {}, client?: Queryable): Promise<ScheduleHistoryEntry[]> {
    return getScheduleHistory(this.runner(client), key, checkOptions(options, 'options', ['namespace', 'limit'], 'a schedule-history option'));
  }

  /**
   * Pauses a schedule (namespace `default` unless given): its occurrences are skipped until it
   * is resumed. Returns false when it was paused already.
   */
  async pauseSchedule(key: string, options: ScheduleActionOptions = {}, client?: Queryable): Promise<boolean> {
    return setSchedulePaused(this.runner(client), true, key, options);
  }

  /** Resumes a paused schedule from its next occurrence (nothing missed meanwhile is caught up). Returns false when it was not paused. */
  async resumeSchedule(key: string, options: ScheduleActionOptions = {}, client?: Queryable): Promise<boolean> {
    return setSchedulePaused(this.runner(client), false, key, options);
  }

  /** Enqueues a schedule's job now, besides its occurrences (also while paused), and returns the job's id. */
  async triggerSchedule(key: string, options: ScheduleActionOptions = {}, client?: Queryable): Promise<string> {
    return triggerSchedule(this.runner(client), key, options);
  }

  /**
   * Jobs newest first whose tags include `tag`, whose payload contains `payload`
   * (`payload @> ...`) and whose error has the name `error` or a message containing it. Without
   * an index that serves the search, a call examines at most `scanLimit` jobs and a partial page
   * comes with a cursor; a GIN index on `workhorse.job (payload)` makes payload searches direct
   * (docs/dashboard.md).
   *
   * @example
   * const { items } = await admin.findJobs({ payload: { orderId: 42 } });
   */
  async findJobs(filter: FindJobsFilter, client?: Queryable): Promise<Page<JobSnapshot>> {
    filter = checkOptions(filter, 'filter', ['tag', 'payload', 'error', 'limit', 'scanLimit', 'cursor'], 'a findJobs filter');
    return findJobs(this.runner(client), filter);
  }

  /** The latest attempt's start and run time and the wait before the first start, of up to 1000 jobs (by id). */
  async jobDurations(jobIds: readonly string[], client?: Queryable): Promise<Map<string, JobDuration>> {
    if (!Array.isArray(jobIds) || jobIds.length > 1000) throw new WorkhorseValidationError('jobIds', 'must be an array of at most 1000 job ids');
    return jobDurations(this.runner(client), jobIds.map((id) => checkJobId(id)));
  }

  /**
   * Run and wait time percentiles per queue or job type of the attempts that closed since
   * `since` (within the last 7 days), from a sample of at most `sample` attempts (default 20,000).
   */
  async jobTimings(options: { since: Date; group?: 'queue' | 'type'; sample?: number }, client?: Queryable): Promise<TimingStats[]> {
    const { since, group, sample } = checkOptions(options, 'options', ['since', 'group', 'sample'], 'a jobTimings option');
    return jobTimings(this.runner(client), checkDate(since, 'since'), group ?? 'queue', checkParamInteger(sample ?? 20_000, 'sample'));
  }

  /** Failures since `since` (within the last 7 days) grouped by error name and message, most frequent first. */
  async errorGroups(options: { since: Date; limit?: number }, client?: Queryable): Promise<ErrorGroup[]> {
    const { since, limit } = checkOptions(options, 'options', ['since', 'limit'], 'an errorGroups option');
    return errorGroups(this.runner(client), checkDate(since, 'since'), checkParamInteger(limit ?? 20, 'limit'));
  }

  /**
   * Where a call runs when the caller passes no client: the pool. Integrations override it (the
   * Nest `Admin` answers with the current transaction).
   */
  protected runner(client?: Queryable): Queryable {
    return client ?? this.pool;
  }
}
