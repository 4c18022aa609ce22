import type { DedupeOptions } from './dedupe';

/** The seven states of a job. The first four are live (`job_runtime`), the last three terminal. */
export type JobState = 'blocked' | 'scheduled' | 'ready' | 'active' | 'succeeded' | 'failed' | 'canceled';

export const JOB_STATES: readonly JobState[] = [
  'blocked',
  'scheduled',
  'ready',
  'active',
  'succeeded',
  'failed',
  'canceled',
];

/** A JSON value as PostgreSQL's `jsonb` stores it and gives back. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * Anything that runs a parameterised query the way node-postgres does: a `Pool`, a
 * `PoolClient` inside `BEGIN`, or an adapter around another driver's transaction. Pass one as
 * the last argument of `enqueue` to make the job part of that transaction.
 */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** How long to wait before the next attempt after a failed one. */
export type RetryPolicy =
  | {
      kind: 'exponential';
      /** Delay after the first failed attempt. Default 1000 ms. */
      initialMs?: number;
      /** Growth per attempt, 1 to 10. Default 2. */
      multiplier?: number;
      /** Upper bound of any delay. Default 3 600 000 ms (1 hour). */
      maxMs?: number;
      /** Draw each delay from [50%, 100%] of its nominal value. Default true. */
      jitter?: boolean;
    }
  | {
      kind: 'fixed';
      /** The same delay after every failed attempt. Default 1000 ms. */
      delayMs?: number;
    };

/** Options of one enqueued job. Every field is optional. */
export interface EnqueueOptions {
  /** Queue name (default `default`): letters, digits and `. _ : / -`, at most 128 characters. */
  queue?: string;
  /** 0 to 100, higher first; strict, and FIFO within one priority. Default 0. */
  priority?: number;
  /** Do not run before this time. Default: now. */
  runAt?: Date;
  /** Attempts before the job fails for good, 1 to 100. Default 25. */
  maxAttempts?: number;
  /** Backoff between attempts. Default: exponential with jitter from 1 s, capped at 1 h. */
  retryPolicy?: RetryPolicy;
  /** Labels for operators, at most 20 strings of 1 to 64 characters. */
  tags?: string[];
  /**
   * The whole job must end by then: past it the job fails with `DeadlineExceeded` and is never
   * retried, whether it is waiting or running. Enforced by PostgreSQL's clock.
   */
  deadline?: Date;
  /**
   * Each attempt may run this long (1 000 to 86 400 000 ms): then `ctx.signal` aborts with
   * `ExecutionTimeoutError`, the attempt closes as `timeout`, and the retry policy applies.
   */
  executionTimeoutMs?: number;
  /**
   * Makes the enqueue idempotent: while the key lives (`idempotencyTtlMs`, default 24 h), an
   * exact repeat returns the existing job's id and writes nothing, and a repeat with different
   * fields raises `IdempotencyConflictError`. 1 to 512 characters; stored hashed.
   */
  idempotencyKey?: string;
  /** Where the key is unique: default the job's queue. */
  idempotencyScope?: string;
  /** How long the key is remembered, 1 000 ms to 30 days. Default 24 h. */
  idempotencyTtlMs?: number;
  /**
   * Jobs this one waits for (1 to 1000 distinct ids of existing jobs, e.g. enqueued earlier in
   * the same transaction): it stays `blocked` until every one of them has ended, then runs (at
   * `runAt`) or ends by `onDependencyFailed` / `onDependencyCanceled`. See docs/orchestration.md.
   */
  dependsOn?: readonly string[];
  /** What this job does when a prerequisite ends `failed`: `fail` (default), `cancel` or `run`. */
  onDependencyFailed?: DependencyPolicy;
  /** What this job does when a prerequisite ends `canceled`: `fail`, `cancel` (default) or `run`. */
  onDependencyCanceled?: DependencyPolicy;
  /**
   * A deduplication window (throttle or debounce) for this job's queue, type and `key`; use
   * `Queue.enqueueDeduped` to learn which happened. Not with `idempotencyKey`. See
   * docs/deduplication.md.
   */
  dedupe?: DedupeOptions;
  /**
   * The job's concurrency key (a tenant, a customer; 1 to 256 characters): in a queue whose
   * policy has `perKey: { concurrency: n }`, at most n jobs of one key are active at once, across
   * all workers, while other keys keep flowing. Stored with the job; never changes.
   */
  concurrencyKey?: string;
}

/**
 * What a job enqueued with `dependsOn` does when a prerequisite did not succeed: end `failed`
 * (error `DependencyFailed` / `DependencyCanceled`), end `canceled` (same error names), or run
 * anyway (the handler reads every prerequisite's outcome with `ctx.dependencies()`).
 */
export type DependencyPolicy = 'fail' | 'cancel' | 'run';

/** One prerequisite of a job as `ctx.dependencies()` gives it. */
export interface DependencyOutcome {
  jobId: string;
  state: JobState;
  /** The prerequisite's result once it `succeeded`, else null. */
  result: JsonValue | null;
  /** The prerequisite's error envelope once it `failed` or was `canceled`, else null. */
  error: ErrorEnvelope | null;
}

/** One child job as `ctx.runChildren` gives it back once every child has ended. */
export type ChildOutcome<R = JsonValue> =
  | { jobId: string; state: 'succeeded'; result: R; error: null }
  | { jobId: string; state: 'failed' | 'canceled'; result: null; error: ErrorEnvelope };

/** One child job to start with `ctx.runChildren`. */
export interface ChildJobSpec<P = unknown> {
  type: string;
  payload: P;
  options?: Omit<EnqueueOptions, 'dependsOn' | 'onDependencyFailed' | 'onDependencyCanceled'>;
}

/** A job related to another one, with its state now. */
export interface JobLink {
  id: string;
  state: JobState;
}

/** What `Admin.getJob` adds to a snapshot: the jobs it waits on and its family. */
export interface JobLineage {
  /** The prerequisites given in `dependsOn`, in that order. */
  dependencies: JobLink[];
  /** While `blocked`: the prerequisites or children that have not ended yet. */
  waitingOn: JobLink[];
  /** The job that started this one with `ctx.runChild(ren)`, if any. */
  parentId: string | null;
  /** The jobs this one started with `ctx.runChild(ren)`, with the key of each call. */
  children: (JobLink & { key: string })[];
}

/** One job of a batch given to `enqueueMany`. */
export interface EnqueueRequest<P = unknown> extends Omit<EnqueueOptions, 'dependsOn'> {
  type: string;
  payload: P;
  /**
   * As {@link EnqueueOptions.dependsOn}; an entry may also be the index (a number) of an earlier
   * request of the same batch, whose id is not known yet.
   */
  dependsOn?: readonly (string | number)[];
}

/** The error envelope stored for a failed attempt or job. */
export interface ErrorEnvelope {
  name: string;
  message: string;
  stack?: string;
}

/**
 * What `Admin.getJob` and `Admin.listJobs` report about one job. `admin.getJob(definition, id)`
 * types its payload and result by the job's definition.
 */
export interface JobSnapshot<P = JsonValue, R = JsonValue> {
  id: string;
  queue: string;
  type: string;
  payload: P;
  priority: number;
  state: JobState;
  /** Attempts started so far (0 before the first claim). */
  currentAttempt: number;
  maxAttempts: number;
  /** The job's own retry policy; null when none was given (the handler's or the default applies). */
  retryPolicy: RetryPolicy | null;
  tags: string[];
  deadline: Date | null;
  executionTimeoutMs: number | null;
  /** When the job is (or was last) due to run. */
  runAt: Date;
  createdAt: Date;
  /** Set once the job is terminal. */
  finishedAt: Date | null;
  /** The handler's result, for `succeeded` jobs. */
  result: R | null;
  /** The terminal error, or the last attempt's error while the job waits for a retry. */
  error: ErrorEnvelope | null;
  /** The owning worker while `active`. */
  workerId: string | null;
  leaseExpiresAt: Date | null;
  cancelRequestedAt: Date | null;
  /** The last value the handler reported with `ctx.setProgress` (kept after the job ends). */
  progress: JsonValue | null;
  /** For a redriven job: the dead letter it was created from. */
  redrivenFrom: string | null;
  /** For a dead letter: the jobs redriven from it, oldest first. */
  redrivenTo: string[];
  /** The `concurrencyKey` it was enqueued with; null for none. */
  concurrencyKey: string | null;
}

/** One entry of a job's history: a lifecycle event or a closed attempt. */
export interface TimelineEntry {
  id: string;
  at: Date;
  source: 'event' | 'attempt';
  /** Event kind (`enqueued`, `claimed`, `succeeded`, ...) or attempt outcome (`failed`, `expired`, ...). */
  kind: string;
  attempt: number | null;
  workerId: string | null;
  fenceToken: string | null;
  data: { [key: string]: JsonValue } | null;
  /**
   * The login role of the session that wrote an event (PostgreSQL's `session_user`), next to the
   * caller-chosen `data.actor` of a human decision or an operator change; null for attempts, and
   * for events written before the schema recorded it.
   */
  loginRole: string | null;
}

/** A page of results and the cursor of the next page (null on the last page). */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface ListJobsFilter {
  queue?: string;
  type?: string;
  states?: JobState[];
  /** Jobs created at or after this time. */
  createdAfter?: Date;
  /** Jobs created before this time. */
  createdBefore?: Date;
  /**
   * Examine at most this many jobs (1 to 1,000,000; in creation order, through the queue's or
   * the type's index) for one page, so that a filter that rarely matches answers in bounded
   * time: the page may then hold fewer than `limit` jobs while `nextCursor` is not null (read
   * on to search older jobs). Default: no bound.
   */
  scanLimit?: number;
  /** 1 to 1000, default 50. */
  limit?: number;
  cursor?: string;
  /**
   * Only the children of this job (started with `ctx.runChild(ren)`), in the order they were
   * started, on one page; the other filters apply to them.
   */
  parentId?: string;
}

export interface TimelineOptions {
  /** 1 to 1000, default 100. */
  limit?: number;
  cursor?: string;
}

/** Result of `Admin.cancel`. */
export type CancelResult = 'canceled' | 'cancel_requested' | 'already_terminal' | 'not_found';

export interface DeadLetterFilter {
  queue?: string;
  type?: string;
  /** The `name` of the final error, e.g. `PaymentDeclined`. */
  errorName?: string;
  finishedAfter?: Date;
  finishedBefore?: Date;
}

export interface ListDeadLettersOptions extends DeadLetterFilter {
  /** 1 to 1000, default 50. */
  limit?: number;
  cursor?: string;
}

/** Who asked for an operator action and why; recorded with it. */
export interface ActorOptions {
  actor?: string;
  reason?: string;
}

export interface RedriveOptions extends ActorOptions {
  /** Makes the redrive idempotent: a repeat with the same id returns the same new job. */
  requestId: string;
  /**
   * Create another copy of a dead letter that was redriven before (the lineage marks it
   * `again`). Without it, a dead letter is redriven once and later redrives return that job.
   */
  again?: boolean;
}

export interface RedriveManyOptions extends ActorOptions {
  requestId: string;
  /** List what would be redriven and write nothing. */
  dryRun?: boolean;
  /** 1 to 1000 (default 1000). */
  limit?: number;
}

/** One dead letter of a `redriveMany` call; `newJobId` is null in a dry run. */
export interface RedriveResult {
  sourceJobId: string;
  newJobId: string | null;
}

/** A queue's pause state and its live jobs. */
export interface QueueInfo {
  queue: string;
  paused: boolean;
  /** When the pause state last changed, by whom (the caller-chosen actor) and why. */
  changedAt: Date | null;
  changedBy: string | null;
  /** The login role (`session_user`) that last paused or resumed it; null before the schema recorded it. */
  loginRole: string | null;
  reason: string | null;
  ready: number;
  scheduled: number;
  active: number;
  blocked: number;
  /** The queue's flow-control limits ({@link QueuePolicy}); null where none is set. */
  concurrency: number | null;
  rateLimit: RateLimit | null;
  perKey: PerKeyLimit | null;
  /** Who set the policy in force: when, the actor, the login role and the reason (null without one). */
  policyChangedAt: Date | null;
  policyChangedBy: string | null;
  policyLoginRole: string | null;
  policyReason: string | null;
}

/** At most `limit` claims of a queue's jobs in any window of `intervalMs` milliseconds. */
export interface RateLimit {
  /** 1 to 100000. */
  limit: number;
  /** 1 to 86400000 (one day). */
  intervalMs: number;
}

/** At most `concurrency` active jobs per concurrency key of a queue. */
export interface PerKeyLimit {
  /** 1 to 100000. */
  concurrency: number;
}

/**
 * A queue's flow control, enforced by the claim across all workers (`Admin.setQueuePolicy`,
 * `WorkhorseModule.forRoot({ queues })`). A limit left out or null is not applied.
 */
export interface QueuePolicy {
  /** At most this many of the queue's jobs active at once (1 to 100000). */
  concurrency?: number | null;
  rateLimit?: RateLimit | null;
  /**
   * At most `concurrency` active jobs per `concurrencyKey` (the enqueue option); jobs without a
   * key are not limited by it. The keys take turns at each claim.
   */
  perKey?: PerKeyLimit | null;
}

/** A checkpoint a job saved: its name, stored value and who saved it when. */
export interface CheckpointEntry {
  name: string;
  value: JsonValue | null;
  attempt: number;
  workerId: string;
  createdAt: Date;
}

/** Finished jobs of one queue in one time bucket, by terminal state. */
export interface QueueActivity {
  queue: string;
  /** Start of the bucket. */
  bucket: Date;
  succeeded: number;
  failed: number;
  canceled: number;
}

export interface QueueActivityOptions {
  /** Start of the first bucket; within the last 31 days. */
  since: Date;
  /** Length of a bucket, 1 to 86400 seconds. */
  bucketSeconds: number;
}

export type { DedupeOptions, EnqueueOutcome, EnqueueResult } from './dedupe';
