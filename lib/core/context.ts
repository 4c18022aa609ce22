import type { PoolClient } from 'pg';
import type { ClaimedJob } from './claimed-job';
import { ChildJobFailedError, LeaseLostError, WorkhorseValidationError } from './errors';
import { call, callOne } from './protocol/call';
import { DEPENDENCIES, SAVE_CHECKPOINT, SET_PROGRESS, SLEEP } from './protocol/handler';
import { HandlerWaits } from './handler-waits';
import { childRequestsJson, startChildren } from './child-jobs';
import { failpoint } from './failpoints';
import { definedRequest, isJobDefinition, type JobDefinition } from './job-definition';
import type { ChildJobSpec, ChildOutcome, DependencyOutcome, JsonValue, Queryable } from './types';
import { PROTOCOL_LIMITS } from './limits';
import { checkDate, checkParamText, checkText, checkWholeNumber, toJsonText } from './validation';
import type { HumanDecision, WaitForHumanOptions, WaitForSignalOptions } from './waits';
import { JobBlocked, JobSleeping } from './parked-errors';

export { JobBlocked, JobSleeping };

export type { ClaimedJob };

/**
 * The entry a job itself holds under `name`: never a property every object has (a checkpoint
 * named `constructor` or `toString` is the job's own, or not there).
 */
function entryOf<T>(entries: Record<string, T> | null, name: string): T | undefined {
  return entries !== null && Object.hasOwn(entries, name) ? entries[name] : undefined;
}

/** Stores `value` under `name` as the job's own entry (`__proto__` too: it is a name like any other). */
function setEntry<T>(entries: Record<string, T> | null, name: string, value: T): Record<string, T> {
  const into = entries ?? {};
  Object.defineProperty(into, name, { value, writable: true, enumerable: true, configurable: true });
  return into;
}

/**
 * What a context asks of the worker that executes its job. A worker implements it once and
 * every job's context holds it with the worker's own record of that job (`execution`), so
 * starting a job creates no closures.
 */
export interface ExecutingWorker {
  /** The job's AbortSignal (the worker may make it on first use). */
  signalOf(execution: object): AbortSignal;
  /** The database said this worker no longer owns the job. */
  leaseLost(execution: object): void;
  /** The job went to sleep until `wakeAt` (or was canceled meanwhile): the worker lets go of it. */
  slept(execution: object, wakeAt: Date): void;
  /** The job parked on children or a wait (or was canceled meanwhile): the worker lets go of it; `reason` is what the handler is told. */
  parked(execution: object, reason: Error): void;
}

/**
 * What a handler gets besides its payload: who it is, an `AbortSignal` that fires on cancel,
 * lease loss or shutdown, and durable checkpoints.
 *
 * @example
 * worker.handle('order.fulfill', async (payload: { orderId: string }, ctx) => {
 *   const charge = await ctx.checkpoint('charge', () => chargeCard(payload.orderId));
 *   return { chargeId: charge.chargeId, attempt: ctx.attempt };
 * });
 */
export class HandlerContext {
  /** The job's id. */
  readonly jobId: string;
  /** This attempt's number, from 1. */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly queue: string;
  readonly type: string;
  readonly workerId: string;
  /**
   * In a transactional handler (`handle(type, fn, { transactional: true })`): the client of the
   * transaction that also records the job's completion. Write through it and those writes
   * commit exactly when the job succeeds. Undefined for ordinary handlers.
   */
  readonly client: PoolClient | undefined;
  /** Checkpoints being saved now, by name (made on first use). */
  private pendingCheckpoints: Map<string, Promise<unknown>> | null = null;
  /** Signal and human waits (made on first use). */
  private handlerWaits: HandlerWaits | null = null;

  constructor(
    private readonly job: ClaimedJob,
    private readonly worker: ExecutingWorker,
    private readonly execution: object,
    /** Where checkpoints are written: the pool, or a transactional handler's client. */
    private readonly db: Queryable,
    // Sleeps and progress always commit on their own (never inside a transactional handler's
    // transaction, whose rollback must not undo a sleep, and which must not hold the job's row).
    private readonly pool: Queryable,
    client?: PoolClient,
  ) {
    this.client = client;
    this.jobId = job.jobId;
    this.attempt = job.attempt;
    this.maxAttempts = job.maxAttempts;
    this.queue = job.queue;
    this.type = job.type;
    this.workerId = job.workerId;
  }

  /** Aborts when the job is canceled, the lease is lost or the worker shuts down. */
  get signal(): AbortSignal {
    return this.worker.signalOf(this.execution);
  }

  /**
   * Runs `operation` once per job: its result is stored under `name`, and when the handler runs
   * again (after a crash, a retry or a durable sleep) the stored result is returned instead of
   * running the operation again. The result must be JSON (at most 1 MiB); `undefined` is kept.
   * What it returns is always the stored value (as a replay would return it): a call made while
   * another of the same name is under way shares that one's operation and value, and a value
   * stored first by someone else wins over this call's. Throws {@link LeaseLostError} if this
   * worker no longer owns the job.
   */
  async checkpoint<T>(name: string, operation: () => T | Promise<T>): Promise<T> {
    // (Checked before the operation runs, which save_checkpoint_v2 would refuse to store.)
    checkText(name, 'name', PROTOCOL_LIMITS.handler.nameLength.min, PROTOCOL_LIMITS.handler.nameLength.max);
    const stored = entryOf(this.job.checkpoints, name);
    if (stored) return stored[0] as T;
    const pending = this.pendingCheckpoints?.get(name);
    if (pending) return pending as Promise<T>;
    const saving = this.saveCheckpoint(name, operation);
    (this.pendingCheckpoints ??= new Map()).set(name, saving);
    try {
      return await saving;
    } finally {
      this.pendingCheckpoints.delete(name);
    }
  }

  private async saveCheckpoint<T>(name: string, operation: () => T | Promise<T>): Promise<T> {
    this.signal.throwIfAborted();
    const value = await operation();
    const text = value === undefined ? null : toJsonText(value, `checkpoint ${JSON.stringify(name)}`);
    // In a transactional handler the checkpoint is part of its transaction, and commits (or
    // not) with the job's completion; it must not lock the job's row meanwhile (see the SQL).
    const { status, stored } = await callOne<{ status: string; stored: [] | [JsonValue] | null }>(this.db, SAVE_CHECKPOINT, [
      this.job.jobId,
      this.job.workerId,
      this.job.fenceToken,
      name,
      text,
      this.client !== undefined,
    ]);
    if (status === 'stale' || stored === null) {
      this.worker.leaseLost(this.execution);
      throw new LeaseLostError(this.job.jobId);
    }
    // `exists`: another save stored a value first; that one is the stage's, and what SQL answered.
    this.job.checkpoints = setEntry(this.job.checkpoints, name, stored);
    return stored[0] as T;
  }

  /**
   * Reports progress (any JSON, at most 64 KiB), visible in `admin.getJob(id).progress` and kept
   * on the outcome when the job ends. Each call replaces the last value, and commits on its own
   * at once, also in a transactional handler (progress is for watching the job while it runs,
   * and a write to the job's row inside the handler's transaction would hold the row until the
   * handler ends, its lease unrenewable meanwhile). Throws {@link LeaseLostError} if this worker
   * no longer owns the job.
   *
   * @example
   * await ctx.setProgress({ done: 40, total: 100 });
   */
  async setProgress(value: unknown): Promise<void> {
    const text = toJsonText(value, 'progress');
    if (Buffer.byteLength(text, 'utf8') > 65536) {
      throw new WorkhorseValidationError('progress', 'is larger than the 64 KiB limit (65536 bytes of JSON)');
    }
    const { status } = await callOne<{ status: string }>(this.pool, SET_PROGRESS, [this.job.jobId, this.job.workerId, this.job.fenceToken, text]);
    if (status === 'stale') {
      this.worker.leaseLost(this.execution);
      throw new LeaseLostError(this.job.jobId);
    }
  }

  /**
   * A durable sleep: the job is set aside until `ms` after the first time it reached the sleep
   * named `name`, without holding a worker slot or consuming an attempt. The handler then runs
   * again from the top (completed checkpoints replay, and this sleep returns at once). Resolves
   * at once when the wake time has passed; otherwise throws {@link JobSleeping}, which the
   * handler must let through.
   *
   * @example
   * await ctx.checkpoint('send-welcome', () => mailer.welcome(user));
   * await ctx.sleep('wait-a-day', 24 * 3600_000);
   * await ctx.checkpoint('send-tips', () => mailer.tips(user));
   */
  async sleep(name: string, ms: number): Promise<void> {
    // (The range is sleep_v1's to check; a bigint parameter needs a whole number.)
    checkWholeNumber(ms, 'ms', PROTOCOL_LIMITS.handler.sleepMs);
    return this.sleepCall(name, null, ms);
  }

  /** Like {@link sleep}, until a point in time. */
  async sleepUntil(name: string, until: Date): Promise<void> {
    return this.sleepCall(name, checkDate(until, 'until'), null);
  }

  private async sleepCall(name: string, until: Date | null, ms: number | null): Promise<void> {
    checkParamText(name, 'name');
    const known = entryOf(this.job.sleeps, name);
    if (known !== undefined && new Date(known).getTime() <= Date.now()) return;
    this.signal.throwIfAborted();
    const row = await callOne<{ status: string; wake_at: Date | null }>(this.pool, SLEEP, [
      this.job.jobId,
      this.job.workerId,
      this.job.fenceToken,
      name,
      until,
      ms,
    ]);
    if (row.status === 'stale') {
      this.worker.leaseLost(this.execution);
      throw new LeaseLostError(this.job.jobId);
    }
    const wakeAt = row.wake_at as Date;
    this.job.sleeps = setEntry(this.job.sleeps, name, wakeAt.toISOString());
    if (row.status === 'elapsed') return;
    // `sleeping` or `canceled`: either way the job is no longer this worker's to execute.
    this.worker.slept(this.execution, wakeAt);
    throw new JobSleeping(this.job.jobId, wakeAt);
  }

  /**
   * The prerequisites this job was enqueued with (`dependsOn`), in that order, each with its
   * state and its result or error. Every one has ended by the time the handler runs (unless an
   * operator forced the job on), so a job with policy `run` can see which of them failed.
   */
  async dependencies(): Promise<DependencyOutcome[]> {
    type Row = { job_id: string; state: DependencyOutcome['state']; result: JsonValue | null; error: DependencyOutcome['error'] };
    const rows = await call<Row>(this.pool, DEPENDENCIES, [this.job.jobId, this.job.workerId, this.job.fenceToken]);
    return rows.map((row) => ({ jobId: row.job_id, state: row.state, result: row.result, error: row.error }));
  }

  /**
   * Starts a child job and waits for it without holding a worker slot: the child is enqueued
   * and this job parks in `blocked` in one transaction, and {@link JobBlocked} unwinds the
   * handler (let it through). When the child ends, the handler runs again from the top and this
   * call returns the child's result, or throws {@link ChildJobFailedError} (catchable) if it
   * failed or was canceled. `key` names the call: a replay finds the child it started; asking
   * for another type or payload under the same key is a `ChildJobConflictError`.
   *
   * @example
   * const receipt = await ctx.runChild('charge', 'payment.charge', { orderId: payload.orderId });
   */
  runChild<R = JsonValue>(key: string, type: string, payload: unknown, options?: ChildJobSpec['options']): Promise<R>;
  /**
   * Given a definition (`defineJob`), the child's payload must be of its input type (and passes
   * its payload validator, if any, before anything is written) and the result is of its type.
   */
  runChild<P, R, I>(key: string, definition: JobDefinition<P, R, I>, payload: NoInfer<I>, options?: ChildJobSpec['options']): Promise<R>;
  async runChild(key: string, job: string | JobDefinition<unknown, unknown, unknown>, payload: unknown, options?: ChildJobSpec['options']): Promise<unknown> {
    let spec: ChildJobSpec;
    if (isJobDefinition(job)) {
      const defined = await definedRequest(job, payload, options);
      spec = { type: job.type, payload: defined.payload, options: defined.options };
    } else {
      spec = { type: job, payload, options };
    }
    const [outcome] = await this.runChildren(key, [spec]);
    if (outcome.state !== 'succeeded') throw new ChildJobFailedError(outcome.jobId, outcome.state, outcome.error);
    return outcome.result;
  }

  /**
   * Starts 1 to 1000 child jobs at once and waits for all of them (as {@link runChild}); returns
   * every child's outcome in the order given, whether it succeeded or not (like
   * `Promise.allSettled`).
   */
  async runChildren<R = JsonValue>(key: string, children: readonly ChildJobSpec[]): Promise<ChildOutcome<R>[]> {
    checkParamText(key, 'key');
    const requests = childRequestsJson(children);
    this.signal.throwIfAborted();
    failpoint('before-park');
    const rows = await startChildren(this.pool, this.job, key, children, requests);
    const status = rows[0].status;
    if (status === 'stale') {
      this.worker.leaseLost(this.execution);
      throw new LeaseLostError(this.job.jobId);
    }
    if (status !== 'settled') {
      failpoint('after-park');
      // `parked` or `canceled`: either way the job is no longer this worker's to execute.
      const blocked = new JobBlocked(this.job.jobId, 'children');
      this.worker.parked(this.execution, blocked);
      throw blocked;
    }
    return rows.map((row) => ({ jobId: row.child_id, state: row.state, result: row.result, error: row.error }) as ChildOutcome<R>);
  }

  /**
   * Waits for the signal `name` that `queue.sendSignal(jobId, name, payload)` sends, and returns
   * its payload. A signal sent before the wait was reached is kept and returned at once. While
   * none has arrived the job parks (`blocked`, or `scheduled` until the timeout) without holding
   * a worker slot or consuming an attempt, and this call throws `JobWaiting`, which the
   * handler must let through; the handler runs again from the top when the signal arrives, and
   * this call then returns it. The n-th wait for a name in a run takes the n-th signal of that
   * name the job consumes. After `timeoutMs` (counted from the first time the wait is reached)
   * it throws `SignalTimeoutError`, which the handler may catch.
   *
   * @example
   * const shipment = await ctx.waitForSignal<{ trackingId: string }>('shipped', { timeoutMs: 7 * 24 * 3600_000 });
   */
  async waitForSignal<T = JsonValue>(name: string, options?: WaitForSignalOptions): Promise<T> {
    return (await this.waits().forSignal(name, options)) as T;
  }

  /**
   * Waits for a person's decision on `name` and returns it (with who decided, why and when).
   * The first time the wait is reached it opens with `context` (listed by
   * `admin.listHumanWaits`) and `choices`; `queue.completeHumanWait` records the decision
   * (one of `choices` when given) and wakes the job. Meanwhile the job parks, as for
   * {@link waitForSignal} (this call throws `JobWaiting`, which the handler must let
   * through). After `timeoutMs` it throws `HumanWaitTimeoutError`, which the handler may catch.
   *
   * @example
   * const { decision, actor } = await ctx.waitForHuman('approve-refund', {
   *   context: { orderId: 'o-1', amount: 1200 },
   *   choices: ['approve', 'reject'],
   * });
   */
  async waitForHuman<D = JsonValue>(name: string, options?: WaitForHumanOptions): Promise<HumanDecision<D>> {
    return (await this.waits().forHuman(name, options)) as HumanDecision<D>;
  }

  /** The job's waits, made on first use with what they need of this context. */
  private waits(): HandlerWaits {
    if (this.handlerWaits === null) {
      this.handlerWaits = new HandlerWaits({
        job: this.job,
        pool: this.pool,
        signal: () => this.signal,
        leaseLost: () => this.worker.leaseLost(this.execution),
        parked: (reason) => this.worker.parked(this.execution, reason),
      });
    }
    return this.handlerWaits;
  }
}
