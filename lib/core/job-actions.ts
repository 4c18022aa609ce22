import { ACTOR_KEYS, actorOf } from './actor-options';
import { AdminCalls } from './admin-calls';
import { WorkhorseValidationError } from './errors';
import { call } from './protocol/call';
import { CANCEL_MATCHING, DELETE_JOB, DELETE_MATCHING, RESCHEDULE, RUN_NOW, RUN_NOW_MATCHING } from './protocol/admin';
import type { ActorOptions, JobState, Queryable } from './types';
import { checkDate, checkJobId, checkOptions } from './validation';

/**
 * A job's state as the operator actions tell them apart (a refusal's `JobActionRefusedError.state`, a bulk
 * action's `skipped` keys): the live states split by what the job is doing, the terminal ones,
 * and `referenced` (finished, but a live job still reads it: not deletable yet).
 */
export type JobActionState =
  | 'active'
  | 'canceling'
  | 'ready'
  | 'scheduled'
  | 'retrying'
  | 'sleeping'
  | 'waiting'
  | 'blocked'
  | 'succeeded'
  | 'failed'
  | 'canceled'
  | 'referenced';

/**
 * Which jobs a bulk action applies to; every key given must match. Times are compared with the
 * job's creation or finish time; `finishedAfter` / `finishedBefore` only for `deleteMatching`.
 * `jobIds` (1 to 1000) is a selection, e.g. the rows ticked on the dashboard.
 */
export interface JobActionFilter {
  queue?: string;
  type?: string;
  states?: JobState[];
  tag?: string;
  createdAfter?: Date;
  createdBefore?: Date;
  finishedAfter?: Date;
  finishedBefore?: Date;
  jobIds?: string[];
}

/** Options of a bulk action: who asked and why (recorded with each job), a dry run, how many jobs one call changes (1 to 1000, default 1000). */
export interface BulkActionOptions extends ActorOptions {
  dryRun?: boolean;
  limit?: number;
}

/** A job a dry run would change. */
export interface BulkActionSample {
  id: string;
  queue: string;
  type: string;
  state: JobActionState;
  createdAt: Date;
}

/**
 * What a bulk action did, or (a dry run) would do. A call changes at most `limit` jobs, oldest
 * first; call again while `more` to page through the rest.
 */
export interface BulkActionResult {
  action: 'cancel' | 'run_now' | 'delete';
  dryRun: boolean;
  /** Dry run: the jobs the action would change (counting stops at 100,000: `capped`). Otherwise the jobs this call took up. */
  matched: number;
  capped: boolean;
  /** The jobs changed by this call, and their ids. */
  changed: number;
  jobIds: string[];
  /** Each changed job's answer, counted: `canceled` or `cancel_requested` (a running job, whose worker is told), `ready`, `deleted`. */
  outcomes: Record<string, number>;
  /** Jobs the filter matches that the action leaves alone, by state (e.g. `active` for run now and delete). */
  skipped: Partial<Record<JobActionState, number>>;
  /** Jobs a worker was writing just then, or that changed state since they were listed: left alone, looked at again by the next call. */
  busy: number;
  /** Dry run: the first 10 jobs it would change. */
  sample: BulkActionSample[];
  /** Matching jobs remain that the action would change. */
  more: boolean;
}

/** What `runNow` did: made the job ready, found it ready already (nothing written), or found no such job. */
export type RunNowResult = 'ready' | 'already_ready' | 'not_found';

/** What `reschedule` did. */
export type RescheduleResult = 'rescheduled' | 'not_found';

/** What `deleteJob` did. */
export type DeleteJobResult = 'deleted' | 'not_found';

/** A new run time and/or priority (0 to 100), and who asked and why. */
export interface RescheduleOptions extends ActorOptions {
  runAt?: Date;
  priority?: number;
}

const BULK_KEYS = [...ACTOR_KEYS, 'dryRun', 'limit'] as const;

interface BulkRow {
  action: BulkActionResult['action'];
  dryRun: boolean;
  matched: number;
  capped: boolean;
  changed: number;
  jobIds: string[];
  outcomes: Record<string, number>;
  skipped: Partial<Record<JobActionState, number>>;
  busy: number;
  sample: Array<Omit<BulkActionSample, 'createdAt'> & { createdAt: string }>;
  more: boolean;
}

/**
 * The operator actions on jobs of {@link Admin}: run now, reschedule, delete, and cancel / run
 * now / delete over a filter with a dry run. The rules (which states an action applies to, the
 * filter, the bounds) are the SQL functions' (sql/063_job_actions.sql); each refusal of a state
 * is a `JobActionRefusedError` naming it, bad input a `WorkhorseValidationError` naming the field.
 */
export abstract class JobActionCalls extends AdminCalls {
  /**
   * Makes a scheduled, retrying or sleeping job ready now (a sleeping job's pending sleep ends).
   * A running, blocked, waiting or finished job is refused (`JobActionRefusedError`).
   *
   * @example
   * await admin.runNow(jobId, { actor: 'alice', reason: 'customer waiting' });
   */
  async runNow(jobId: string, options: ActorOptions = {}, client?: Queryable): Promise<RunNowResult> {
    checkJobId(jobId);
    const [actor, reason] = actorOf(checkOptions(options, 'options', ACTOR_KEYS, 'a runNow option'));
    const rows = await call<{ status: RunNowResult }>(this.runner(client), RUN_NOW, [jobId, actor, reason], this.pool);
    return rows[0].status;
  }

  /**
   * Gives a job that has not started (scheduled, ready or retrying) a new `runAt` and/or
   * `priority`; any other state is refused (`JobActionRefusedError`).
   *
   * @example
   * await admin.reschedule(jobId, { runAt: new Date(Date.now() + 3_600_000), priority: 90, actor: 'alice' });
   */
  async reschedule(jobId: string, options: RescheduleOptions, client?: Queryable): Promise<RescheduleResult> {
    checkJobId(jobId);
    const given = checkOptions(options, 'options', ['runAt', 'priority', ...ACTOR_KEYS], 'a reschedule option');
    const [actor, reason] = actorOf(given);
    const runAt = given.runAt === undefined ? null : checkDate(given.runAt, 'runAt');
    if (given.priority !== undefined && !Number.isInteger(given.priority)) throw new WorkhorseValidationError('priority', 'must be an integer from 0 to 100');
    const rows = await call<{ status: RescheduleResult }>(
      this.runner(client),
      RESCHEDULE,
      [jobId, runAt, given.priority ?? null, actor, reason],
      this.pool,
    );
    return rows[0].status;
  }

  /**
   * Deletes a finished job (succeeded, failed, canceled) and what references it, as retention
   * would. A live job, or a finished one a live job still references (its prerequisite, child,
   * parent or redrive source), is refused (`JobActionRefusedError`).
   */
  async deleteJob(jobId: string, options: ActorOptions = {}, client?: Queryable): Promise<DeleteJobResult> {
    checkJobId(jobId);
    const [actor, reason] = actorOf(checkOptions(options, 'options', ACTOR_KEYS, 'a deleteJob option'));
    const rows = await call<{ status: DeleteJobResult }>(this.runner(client), DELETE_JOB, [jobId, actor, reason], this.pool);
    return rows[0].status;
  }

  /**
   * Cancels up to `limit` jobs the filter matches, oldest first, each as `cancel` does (a
   * running job's worker is told to stop). With `dryRun`, counts them and shows a sample instead.
   *
   * @example
   * const preview = await admin.cancelMatching({ queue: 'emails', type: 'newsletter' }, { dryRun: true });
   * if (preview.matched < 5000) {
   *   let page; do { page = await admin.cancelMatching({ queue: 'emails', type: 'newsletter' }, { actor: 'alice', reason: 'bad template' }); } while (page.more && page.changed > 0);
   * }
   */
  async cancelMatching(filter: JobActionFilter, options: BulkActionOptions = {}, client?: Queryable): Promise<BulkActionResult> {
    return this.bulk(CANCEL_MATCHING, filter, options, client);
  }

  /** Runs up to `limit` scheduled, retrying or sleeping jobs the filter matches now (as `runNow`); others are skipped and counted. */
  async runNowMatching(filter: JobActionFilter, options: BulkActionOptions = {}, client?: Queryable): Promise<BulkActionResult> {
    return this.bulk(RUN_NOW_MATCHING, filter, options, client);
  }

  /** Deletes up to `limit` finished jobs the filter matches (as `deleteJob`); live and referenced ones are skipped and counted. */
  async deleteMatching(filter: JobActionFilter, options: BulkActionOptions = {}, client?: Queryable): Promise<BulkActionResult> {
    return this.bulk(DELETE_MATCHING, filter, options, client);
  }

  private async bulk(statement: string, filter: JobActionFilter, options: BulkActionOptions, client?: Queryable): Promise<BulkActionResult> {
    if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
      throw new WorkhorseValidationError('filter', 'must be an object ({} for every job)');
    }
    const given = checkOptions(options, 'options', BULK_KEYS, 'a bulk action option');
    const [actor, reason] = actorOf(given);
    if (given.dryRun !== undefined && typeof given.dryRun !== 'boolean') throw new WorkhorseValidationError('dryRun', 'must be true or false');
    if (given.limit !== undefined && !Number.isInteger(given.limit)) throw new WorkhorseValidationError('limit', 'must be an integer from 1 to 1000');
    const rows = await call<{ result: BulkRow }>(
      this.runner(client),
      statement,
      [JSON.stringify(filter), given.dryRun ?? false, actor, reason, given.limit ?? 1000],
      this.pool,
    );
    const r = rows[0].result;
    return { ...r, sample: r.sample.map((s) => ({ ...s, createdAt: new Date(s.createdAt) })) };
  }
}
