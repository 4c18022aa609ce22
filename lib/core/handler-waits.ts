import type { ClaimedJob } from './claimed-job';
import { HumanWaitTimeoutError, JobCanceledError, LeaseLostError, SignalTimeoutError, WorkhorseValidationError } from './errors';
import { callOne } from './protocol/call';
import { WAIT_HUMAN, WAIT_SIGNAL } from './protocol/handler';
import { failpoint } from './failpoints';
import type { JsonValue, Queryable } from './types';
import { checkOptions, checkParamText } from './validation';
import { checkHumanWaitOptions, checkWaitTimeout, type HumanDecision, type WaitForHumanOptions, type WaitForSignalOptions } from './waits';

/**
 * Thrown out of `ctx.waitForSignal` and `ctx.waitForHuman` when the job parked to wait: the
 * worker has let go of the job and the handler must unwind (do not catch it). The handler runs
 * again from the top when the wait is answered or times out.
 */
export class JobWaiting extends Error {
  constructor(
    readonly jobId: string,
    /** What the job waits for. */
    readonly waitFor: 'signal' | 'human',
    /** The wait's name. */
    readonly waitName: string,
    /** When the wait times out, or null. */
    readonly timeoutAt: Date | null,
  ) {
    super(`Job ${jobId} waits for ${waitFor === 'signal' ? 'signal' : 'a human decision'} "${waitName}"; the handler runs again then.`);
    this.name = 'JobWaiting';
  }
}

/** What a handler's context lends its waits. */
export interface WaitScope {
  readonly job: ClaimedJob;
  /** Waits always commit on their own (never in a transactional handler's transaction). */
  readonly pool: Queryable;
  /** The job's AbortSignal. */
  signal(): AbortSignal;
  /** The database said this worker no longer owns the job. */
  leaseLost(): void;
  /** The job parked (or ended by a pending cancel): the worker lets go of it; `reason` is what the handler is told. */
  parked(reason: Error): void;
}

/**
 * The signal and human waits of one run of a handler (`ctx.waitForSignal`, `ctx.waitForHuman`):
 * each is one owner call (wait_signal_v1, wait_human_v1) that answers, times out or parks the job.
 */
export class HandlerWaits {
  /** How many waits for each signal name this run reached (the n-th is wait n on every replay). */
  private readonly signalWaits = new Map<string, number>();

  constructor(private readonly scope: WaitScope) {}

  async forSignal(name: string, options: WaitForSignalOptions | undefined): Promise<JsonValue> {
    checkParamText(name, 'name');
    const timeoutMs = checkWaitTimeout(checkOptions(options, 'options', ['timeoutMs'], 'a signal-wait option').timeoutMs);
    const seq = (this.signalWaits.get(name) ?? 0) + 1;
    this.signalWaits.set(name, seq);
    const row = await this.call<{ status: string; payload: JsonValue; timeout_at: Date | null }>(
      WAIT_SIGNAL,
      [name, seq, timeoutMs],
    );
    if (row.status === 'delivered') return row.payload;
    if (row.status === 'timed_out') throw new SignalTimeoutError(this.scope.job.jobId, name, row.timeout_at as Date);
    throw this.parkedOn(row.status, 'signal', name, row.timeout_at);
  }

  async forHuman(name: string, options: WaitForHumanOptions | undefined): Promise<HumanDecision> {
    checkParamText(name, 'name');
    const { context, choices, timeoutMs } = checkHumanWaitOptions(options);
    const row = await this.call<{
      status: string;
      decision: JsonValue;
      actor: string;
      reason: string | null;
      decided_at: Date;
      timeout_at: Date | null;
    }>(WAIT_HUMAN, [name, context, choices, timeoutMs]);
    if (row.status === 'decided') {
      // An ISO 8601 string, not a Date: what a handler is given it can return or checkpoint as it is.
      return { decision: row.decision, actor: row.actor, reason: row.reason, decidedAt: row.decided_at.toISOString() };
    }
    if (row.status === 'timed_out') throw new HumanWaitTimeoutError(this.scope.job.jobId, name, row.timeout_at as Date);
    throw this.parkedOn(row.status, 'human', name, row.timeout_at);
  }

  /** Runs a wait function as the job's owner (job id, worker id and fence first). */
  private async call<R extends { status: string }>(statement: string, values: unknown[]): Promise<R> {
    const { job, pool } = this.scope;
    this.scope.signal().throwIfAborted();
    failpoint('before-wait');
    const row = await callOne<R>(pool, statement, [job.jobId, job.workerId, job.fenceToken, ...values]);
    failpoint('after-wait');
    if (row.status === 'stale') {
      this.scope.leaseLost();
      throw new LeaseLostError(job.jobId);
    }
    return row;
  }

  /** The job parked (`waiting`) or ended by a pending cancel (`canceled`): the worker lets go of it. */
  private parkedOn(status: string, waitFor: 'signal' | 'human', name: string, timeoutAt: Date | null): Error {
    const jobId = this.scope.job.jobId;
    const reason = status === 'canceled' ? new JobCanceledError(jobId) : new JobWaiting(jobId, waitFor, name, timeoutAt);
    this.scope.parked(reason);
    return reason;
  }
}
