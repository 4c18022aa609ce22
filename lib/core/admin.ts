import { checkCursor } from './cursor';
import { call } from './protocol/call';
import {
  CANCEL,
  GET_JOB,
  GET_QUEUE,
  JOB_LINKS,
  LIST_CHILDREN,
  LIST_DEAD_LETTERS,
  LIST_JOBS,
  LIST_QUEUES,
  PAUSE_QUEUE,
  QUEUE_ACTIVITY,
  READ_CHECKPOINTS,
  REDRIVE,
  REDRIVE_MANY,
  RESUME_QUEUE,
  SET_QUEUE_POLICY,
  TIMELINE,
} from './protocol/admin';
import { WorkhorseValidationError } from './errors';
import { toSnapshot, type JobRow } from './protocol/job-row';
import { toPage, type PagedRow } from './paging';
import { toTimelineEntry, type TimelineRow } from './timeline';
import { ACTOR_KEYS, actorOf } from './actor-options';
import { JobActionCalls } from './job-actions';
import {
  JOB_STATES,
  type ActorOptions,
  type CancelResult,
  type CheckpointEntry,
  type DeadLetterFilter,
  type ListDeadLettersOptions,
  type QueueActivity,
  type QueueActivityOptions,
  type QueueInfo,
  type QueuePolicy,
  type RedriveManyOptions,
  type RedriveOptions,
  type RedriveResult,
  type JobLineage,
  type JobSnapshot,
  type JobState,
  type JsonValue,
  type ListJobsFilter,
  type Page,
  type Queryable,
  type TimelineEntry,
  type TimelineOptions,
} from './types';
import { isJobDefinition, type JobDefinition } from './job-definition';
import { idleQueueInfo, toQueueInfo, type QueueRow } from './queue-info';
import { policyJson } from './queue-policy';
import { toLineage, type LinkRow } from './lineage';
import { checkDate, checkJobId, checkName, checkOptions, checkParamInteger, checkParamText } from './validation';
import { listJobSignals, listJobWaits, type JobSignal, type JobWait, type JobWaitsOptions } from './job-waits';
import {
  completeHumanWait,
  listHumanWaits,
  type CompleteHumanWaitOptions,
  type CompleteHumanWaitStatus,
  type HumanWait,
  type ListHumanWaitsFilter,
} from './waits';

const DEAD_LETTER_KEYS = ['queue', 'type', 'errorName', 'finishedAfter', 'finishedBefore'] as const;

/**
 * Operator reads and actions. Every method takes an optional client as its last argument, so
 * admin calls can join a transaction; by default the pool is used.
 *
 * @example
 * const admin = new Admin(pool);
 * const job = await admin.getJob(jobId);
 * console.log(job?.state, job?.currentAttempt, job?.result);
 */
export class Admin extends JobActionCalls {

  /**
   * The job's snapshot, whichever state it is in, or null if no such job exists. Given a
   * definition first (`defineJob`), the payload and result are typed by it, and a job of
   * another type is refused (`WorkhorseValidationError` on `jobId`).
   */
  getJob(jobId: string, client?: Queryable): Promise<(JobSnapshot & JobLineage) | null>;
  getJob<P, R, I>(definition: JobDefinition<P, R, I>, jobId: string, client?: Queryable): Promise<(JobSnapshot<P, R> & JobLineage) | null>;
  async getJob(
    job: string | JobDefinition<unknown, unknown, unknown>,
    ...rest: [Queryable?] | [string, Queryable?]
  ): Promise<(JobSnapshot<unknown, unknown> & JobLineage) | null> {
    const definition = isJobDefinition(job) ? job : undefined;
    const [jobId, client] = definition ? (rest as [string, Queryable?]) : [job as string, rest[0] as Queryable | undefined];
    checkJobId(jobId);
    const rows = await this.run<JobRow>(client, GET_JOB, [jobId]);
    if (rows.length === 0) return null;
    if (definition !== undefined && rows[0].type !== definition.type) {
      throw new WorkhorseValidationError('jobId', `is a job of type "${rows[0].type}", not "${definition.type}"`);
    }
    const links = await this.run<LinkRow>(client, JOB_LINKS, [jobId]);
    return { ...toSnapshot(rows[0]), ...toLineage(links, rows[0].state) };
  }

  /**
   * The job's history (lifecycle events and closed attempts) in the order it was written, a page
   * at a time; pass `nextCursor` back to read on.
   */
  async getJobTimeline(jobId: string, options?: TimelineOptions, client?: Queryable): Promise<Page<TimelineEntry>> {
    checkJobId(jobId);
    options = checkOptions(options, 'options', ['limit', 'cursor'], 'a timeline option');
    const limit = options.limit === undefined ? 100 : checkParamInteger(options.limit, 'limit');
    const rows = await this.run<TimelineRow>(client, TIMELINE, [jobId, checkCursor(options.cursor), limit]);
    return toPage(rows, toTimelineEntry);
  }

  /**
   * Jobs newest first, filtered by queue, type and current state, a page at a time. Paging is
   * stable: jobs enqueued meanwhile do not shift later pages.
   */
  async listJobs(filter?: ListJobsFilter, client?: Queryable): Promise<Page<JobSnapshot>> {
    const keys = ['queue', 'type', 'states', 'createdAfter', 'createdBefore', 'scanLimit', 'limit', 'cursor', 'parentId'];
    filter = checkOptions(filter, 'filter', keys, 'a listJobs filter');
    const queue = filter.queue === undefined ? null : checkParamText(filter.queue, 'queue');
    const type = filter.type === undefined ? null : checkParamText(filter.type, 'type');
    let states: JobState[] | null = null;
    if (filter.states !== undefined) {
      if (!Array.isArray(filter.states) || filter.states.some((s) => !JOB_STATES.includes(s))) {
        throw new WorkhorseValidationError('states', `must be an array of ${JOB_STATES.join(', ')}`);
      }
      states = filter.states;
    }
    const limit = filter.limit === undefined ? 50 : checkParamInteger(filter.limit, 'limit');
    const scanLimit = filter.scanLimit === undefined ? null : checkParamInteger(filter.scanLimit, 'scanLimit');
    const createdAfter = filter.createdAfter === undefined ? null : checkDate(filter.createdAfter, 'createdAfter');
    const createdBefore = filter.createdBefore === undefined ? null : checkDate(filter.createdBefore, 'createdBefore');
    if (filter.parentId !== undefined) {
      // A parent's children in the order they were started.
      const parentId = checkJobId(filter.parentId, 'parentId');
      const children = await this.run<JobRow & PagedRow>(client, LIST_CHILDREN, [parentId, queue, type, states, createdAfter, createdBefore, limit, checkCursor(filter.cursor)]);
      return toPage(children, toSnapshot);
    }
    const rows = await this.run<JobRow & PagedRow>(client, LIST_JOBS, [
      queue,
      type,
      states,
      limit,
      checkCursor(filter.cursor),
      createdAfter,
      createdBefore,
      scanLimit,
    ]);
    return toPage(rows, toSnapshot);
  }

  /** The checkpoints a job saved, oldest first, with their stored values. */
  async listCheckpoints(jobId: string, client?: Queryable): Promise<CheckpointEntry[]> {
    checkJobId(jobId);
    const rows = await this.run<{ name: string; value: JsonValue | null; attempt: number; worker_id: string; created_at: Date }>(
      client,
      READ_CHECKPOINTS,
      [jobId],
    );
    return rows.map((r) => ({ name: r.name, value: r.value, attempt: r.attempt, workerId: r.worker_id, createdAt: r.created_at }));
  }

  /**
   * Finished jobs per queue and time bucket since `since`, by terminal state (buckets without
   * any are left out). Its cost is that of the jobs finished in the window.
   */
  async queueActivity(options: QueueActivityOptions, client?: Queryable): Promise<QueueActivity[]> {
    const given = checkOptions(options, 'options', ['since', 'bucketSeconds'], 'a queueActivity option');
    const since = checkDate(given.since, 'since');
    const bucketSeconds = checkParamInteger(given.bucketSeconds, 'bucketSeconds');
    const rows = await this.run<{ queue: string; bucket: Date; succeeded: string; failed: string; canceled: string }>(
      client,
      QUEUE_ACTIVITY,
      [since, bucketSeconds],
    );
    return rows.map((r) => ({
      queue: r.queue,
      bucket: r.bucket,
      succeeded: Number(r.succeeded),
      failed: Number(r.failed),
      canceled: Number(r.canceled),
    }));
  }

  /**
   * Cancels a job: at once if it is not running; otherwise its worker is told to stop (the
   * handler's `ctx.signal` aborts) and the job ends `canceled` when the worker acknowledges.
   * `actor` and `reason` are recorded: in the `cancel_requested` event of a running job, in the
   * cancellation envelope (the job's `error`) of any other.
   */
  async cancel(jobId: string, options?: ActorOptions, client?: Queryable): Promise<CancelResult> {
    checkJobId(jobId);
    const [actor, reason] = actorOf(checkOptions(options, 'options', ACTOR_KEYS, 'a cancel option'));
    const rows = await this.run<{ status: CancelResult }>(client, CANCEL, [
      jobId,
      reason,
      actor,
    ]);
    return rows[0].status;
  }

  /**
   * The open human waits (see `ctx.waitForHuman`), oldest first, with their context and choices,
   * filtered by queue, type, wait name and job id, a page at a time.
   */
  async listHumanWaits(filter: ListHumanWaitsFilter = {}, client?: Queryable): Promise<Page<HumanWait>> {
    return listHumanWaits(this.runner(client), filter);
  }

  /**
   * The signals sent to a job, the newest first (at most `limit`, default 100): each `buffered`
   * until a wait for its name consumes it, then `consumed`.
   */
  async listJobSignals(jobId: string, options?: JobWaitsOptions, client?: Queryable): Promise<JobSignal[]> {
    return listJobSignals(this.runner(client), jobId, options);
  }

  /**
   * The waits a job's handler reached, the newest first (at most `limit`, default 100): signal
   * waits and human waits, open or answered, with their deadlines, and a human wait's context,
   * choices and decision.
   */
  async listJobWaits(jobId: string, options?: JobWaitsOptions, client?: Queryable): Promise<JobWait[]> {
    return listJobWaits(this.runner(client), jobId, options);
  }

  /**
   * Records an operator's decision for a job's open human wait, as `queue.completeHumanWait`
   * does (same checks and answers), with the operator's rights.
   */
  async completeHumanWait(jobId: string, name: string, decision: unknown, options: CompleteHumanWaitOptions, client?: Queryable): Promise<CompleteHumanWaitStatus> {
    return completeHumanWait(this.runner(client), jobId, name, decision, options);
  }

  /**
   * Dead letters (failed jobs), newest first, filtered by queue, type, final error name and
   * finish time, a page at a time. Reads an index that live dispatch never touches.
   */
  async listDeadLetters(options?: ListDeadLettersOptions, client?: Queryable): Promise<Page<JobSnapshot>> {
    options = checkOptions(options, 'options', [...DEAD_LETTER_KEYS, 'limit', 'cursor'], 'a dead-letter filter');
    const filter = this.deadLetterFilter(options);
    const limit = options.limit === undefined ? 50 : checkParamInteger(options.limit, 'limit');
    const rows = await this.run<JobRow & PagedRow>(client, LIST_DEAD_LETTERS, [
      filter.queue ?? null,
      filter.type ?? null,
      filter.errorName ?? null,
      filter.finishedAfter ?? null,
      filter.finishedBefore ?? null,
      limit,
      checkCursor(options.cursor),
    ]);
    return toPage(rows, toSnapshot);
  }

  /**
   * Redrives a dead letter: creates a new job with the same definition at attempt 1 (no
   * checkpoints carried over) and returns its id. The source stays `failed`; both jobs record
   * the lineage (`redrivenTo` / `redrivenFrom` and their timelines). A dead letter is redriven
   * once: a later redrive, with any `requestId`, from any process, returns the job the first one
   * created, unless it passes `again: true`, which creates another copy (idempotent per
   * `requestId`, and marked `again` in the lineage).
   */
  async redrive(jobId: string, options: RedriveOptions, client?: Queryable): Promise<string> {
    checkJobId(jobId);
    const given = checkOptions(options, 'options', ['requestId', ...ACTOR_KEYS, 'again'], 'a redrive option');
    const requestId = checkParamText(given.requestId, 'requestId');
    const [actor, reason] = actorOf(given);
    if (given.again !== undefined && typeof given.again !== 'boolean') throw new WorkhorseValidationError('again', 'must be true or false');
    const rows = await this.run<{ id: string }>(client, REDRIVE, [
      jobId,
      requestId,
      actor,
      reason,
      given.again ?? false,
    ]);
    return rows[0].id;
  }

  /**
   * Redrives up to 1000 dead letters matching a filter, each idempotent under
   * `<requestId>:<job id>`; dead letters redriven earlier by another request are skipped. With
   * `dryRun` nothing is written and the result lists what would be redriven.
   */
  async redriveMany(filter: DeadLetterFilter, options: RedriveManyOptions, client?: Queryable): Promise<RedriveResult[]> {
    if (filter === undefined) throw new WorkhorseValidationError('filter', 'must be an object ({} for every dead letter)');
    const checked = this.deadLetterFilter(checkOptions(filter, 'filter', DEAD_LETTER_KEYS, 'a dead-letter filter'));
    const given = checkOptions(options, 'options', ['requestId', ...ACTOR_KEYS, 'dryRun', 'limit'], 'a redriveMany option');
    const requestId = checkParamText(given.requestId, 'requestId');
    const [actor, reason] = actorOf(given);
    const limit = given.limit === undefined ? 1000 : checkParamInteger(given.limit, 'limit');
    if (given.dryRun !== undefined && typeof given.dryRun !== 'boolean') {
      throw new WorkhorseValidationError('dryRun', 'must be true or false');
    }
    const wire = {
      ...(checked.queue !== undefined && { queue: checked.queue }),
      ...(checked.type !== undefined && { type: checked.type }),
      ...(checked.errorName !== undefined && { errorName: checked.errorName }),
      ...(checked.finishedAfter && { finishedAfter: checked.finishedAfter.toISOString() }),
      ...(checked.finishedBefore && { finishedBefore: checked.finishedBefore.toISOString() }),
    };
    const rows = await this.run<{ source_job_id: string; new_job_id: string | null }>(
      client,
      REDRIVE_MANY,
      [JSON.stringify(wire), requestId, given.dryRun ?? false, actor, reason, limit],
    );
    return rows.map((r) => ({ sourceJobId: r.source_job_id, newJobId: r.new_job_id }));
  }

  /** Pauses a queue: workers stop claiming from it; running jobs finish and enqueue goes on. */
  async pauseQueue(queue: string, options?: ActorOptions, client?: Queryable): Promise<QueueInfo> {
    return this.setPaused(PAUSE_QUEUE, queue, options, client);
  }

  /** Resumes a paused queue and wakes its workers. */
  async resumeQueue(queue: string, options?: ActorOptions, client?: Queryable): Promise<QueueInfo> {
    return this.setPaused(RESUME_QUEUE, queue, options, client);
  }

  /**
   * Sets a queue's flow control, replacing its previous policy: at most `concurrency` of its jobs
   * active at once, at most `rateLimit.limit` claims in any window of `rateLimit.intervalMs`, and
   * at most `perKey.concurrency` active jobs per `concurrencyKey`, across all workers. A limit left out or null is not applied; `null` (or `{}`) removes the
   * policy. Takes effect at the next claim.
   */
  async setQueuePolicy(queue: string, policy: QueuePolicy | null, options?: ActorOptions, client?: Queryable): Promise<QueueInfo> {
    checkName(queue, 'queue');
    const [actor, reason] = actorOf(checkOptions(options, 'options', ACTOR_KEYS, 'an option of a queue action'));
    // Checked by set_queue_policy_v1 (fields, bounds, named errors).
    await this.run(client, SET_QUEUE_POLICY, [queue, policyJson(policy), actor, reason]);
    return this.queueInfo(queue, client);
  }

  /** Every queue with live jobs, a pause record or a policy: whether it is paused, by whom, its live counts and limits. */
  async listQueues(client?: Queryable): Promise<QueueInfo[]> {
    const rows = await this.run<QueueRow>(client, LIST_QUEUES, []);
    return rows.map(toQueueInfo);
  }

  private async setPaused(statement: typeof PAUSE_QUEUE | typeof RESUME_QUEUE, queue: string, options: ActorOptions | undefined, client?: Queryable): Promise<QueueInfo> {
    checkParamText(queue, 'queue');
    const [actor, reason] = actorOf(checkOptions(options, 'options', ACTOR_KEYS, 'an option of a queue action'));
    await this.run(client, statement, [queue, actor, reason]);
    return this.queueInfo(queue, client);
  }

  private async queueInfo(queue: string, client?: Queryable): Promise<QueueInfo> {
    const rows = await this.run<QueueRow>(client, GET_QUEUE, [queue]);
    // (A queue with no jobs, no pause record and no policy left has no row.)
    return rows[0] === undefined ? idleQueueInfo(queue) : toQueueInfo(rows[0]);
  }

  // The filter's keys were checked by the caller (checkOptions); these are its values, which the
  // SQL functions check (names, the error name's length, the times' range).
  private deadLetterFilter(filter: DeadLetterFilter): DeadLetterFilter {
    return {
      queue: filter.queue === undefined ? undefined : checkParamText(filter.queue, 'queue'),
      type: filter.type === undefined ? undefined : checkParamText(filter.type, 'type'),
      errorName: filter.errorName === undefined ? undefined : checkParamText(filter.errorName, 'errorName'),
      finishedAfter: filter.finishedAfter === undefined ? undefined : checkDate(filter.finishedAfter, 'finishedAfter'),
      finishedBefore: filter.finishedBefore === undefined ? undefined : checkDate(filter.finishedBefore, 'finishedBefore'),
    };
  }

  private run<R>(client: Queryable | undefined, statement: string, values: unknown[]): Promise<R[]> {
    return call<R>(this.runner(client), statement, values, this.pool);
  }
}
