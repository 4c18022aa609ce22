import type { CheckedOutClient } from '../checked-out-client';
import { JobBlocked, JobSleeping, type ExecutingWorker } from '../context';
import { JobWaiting } from '../handler-waits';
import { ExecutionTimeoutError, JobCanceledError, LeaseLostError, WorkerShutdownError } from '../errors';
import type { AbandonReason } from '../events';
import type { EventHub } from './event-hub';
import {
  abandon,
  abort,
  endedFields,
  handlerReturned,
  interrupt,
  interruptionOf,
  isRunning,
  jobFields,
  signalOf,
  type Execution,
  type Interruption,
} from './execution';
import type { LeaseListener } from './heartbeater';
import type { OutcomeRecorder } from './outcome-recorder';

const DONE: Promise<void> = Promise.resolve();

const REASONS: Record<Exclude<Interruption, 'abandoned'>, AbandonReason> = {
  lost: 'lease_lost',
  canceled: 'canceled',
  timeout: 'timeout',
  sleeping: 'sleeping',
};

/**
 * Everything that stops a handler from outside: its execution timeout, a lost lease or a
 * cancel request (the heartbeater's news), a durable sleep (its context's), and the worker
 * giving up on it. A handler is told through `ctx.signal`; one that has not returned
 * `abandonAfterMs` after its attempt is over is abandoned: its slot is freed, what the end of
 * the attempt means is recorded (a timeout as a failed attempt, a cancellation acknowledged),
 * `job.abandoned` reports it with the count of abandoned handlers still running, and whatever
 * the handler does later is ignored. Stopping the worker abandons every handler still running
 * after `shutdownTimeoutMs`.
 */
export class Interrupter implements LeaseListener, ExecutingWorker {
  /** Handlers the worker abandoned that have not returned yet. */
  abandonedCount = 0;
  /** The transactions of transactional handlers running now (an abandoned one's connection is closed). */
  readonly transactions = new Map<Execution, CheckedOutClient>();

  constructor(
    private readonly executions: ReadonlyMap<string, Execution>,
    private readonly recorder: OutcomeRecorder,
    private readonly hub: EventHub,
    private readonly abandonAfterMs: number,
  ) {}

  /** Aborts the handler when the job's execution timeout passes (the server closes the attempt then too). */
  startTimeout(execution: Execution, timeoutMs: number, sentAt: number): void {
    // Counted from before the claim was sent, as the server counts from the claim.
    execution.timer = setTimeout(() => {
      if (interruptionOf(execution) === null) this.interrupt(execution, 'timeout', new ExecutionTimeoutError(execution.job.jobId, timeoutMs));
    }, Math.max(0, sentAt + timeoutMs - Date.now()));
  }

  /**
   * The handler returned or threw. False when the worker had abandoned it: what it did no
   * longer counts.
   */
  handlerDone(execution: Execution): boolean {
    if (handlerReturned(execution)) return true;
    if (interruptionOf(execution) === 'abandoned') this.abandonedCount--;
    return false;
  }

  // ---- the heartbeater's listener ----------------------------------------------------------------

  lost(jobId: string): void {
    const execution = this.executions.get(jobId);
    if (execution) this.loseLease(execution);
  }

  cancelRequested(jobId: string): void {
    const execution = this.executions.get(jobId);
    if (execution && interruptionOf(execution) === null) this.interrupt(execution, 'canceled', new JobCanceledError(jobId));
  }

  // ---- every context's owner ---------------------------------------------------------------------

  signalOf(execution: object): AbortSignal {
    return signalOf(execution as Execution);
  }

  leaseLost(execution: object): void {
    this.loseLease(execution as Execution);
  }

  slept(execution: object, wakeAt: Date): void {
    const e = execution as Execution;
    if (interruptionOf(e) !== null) return;
    this.interrupt(e, 'sleeping', new JobSleeping(e.job.jobId, wakeAt));
    this.hub.emit({ name: 'job.sleeping', ...jobFields(e), wakeAt });
  }

  parked(execution: object, reason: Error): void {
    const e = execution as Execution;
    if (interruptionOf(e) !== null) return;
    // Let go of as a sleeping job is: the database holds its new state, nothing is left to record.
    this.interrupt(e, 'sleeping', reason);
    // (A pending cancel ended the job instead: no `job.blocked` then.)
    if (reason instanceof JobBlocked) this.hub.emit({ name: 'job.blocked', ...jobFields(e), waitingFor: reason.waitingFor });
    else if (reason instanceof JobWaiting) this.hub.emit({ name: 'job.blocked', ...jobFields(e), waitingFor: reason.waitFor });
  }

  // ---- abandoning --------------------------------------------------------------------------------

  /** Stopping gave up waiting: abandons every handler still running; resolves once their endings are recorded. */
  async abandonAll(): Promise<void> {
    await Promise.all([...this.executions.values()].map((execution) => this.abandon(execution)));
  }

  private loseLease(execution: Execution): void {
    const interruption = interruptionOf(execution);
    if (interruption !== 'lost' && interruption !== 'abandoned') {
      this.interrupt(execution, 'lost', new LeaseLostError(execution.job.jobId));
    }
  }

  /** Tells the handler (its signal aborts with `reason`), and gives it `abandonAfterMs` to return. */
  private interrupt(execution: Execution, interruption: Exclude<Interruption, 'abandoned'>, reason: Error): void {
    const first = interruptionOf(execution) === null;
    if (!interrupt(execution, interruption)) return;
    abort(execution, reason);
    if (first && isRunning(execution)) {
      // The execution timeout's timer, if any, has nothing left to do.
      if (execution.timer) clearTimeout(execution.timer);
      execution.timer = setTimeout(() => void this.abandon(execution), this.abandonAfterMs);
    }
  }

  private abandon(execution: Execution): Promise<void> {
    if (!isRunning(execution)) return DONE;
    const interruption = interruptionOf(execution);
    if (interruption === 'abandoned') return DONE;
    // The reason the handler was told of, before it becomes 'abandoned' (a shutdown tells it now).
    const told = interruption === null ? new WorkerShutdownError(execution.job.jobId) : (signalOf(execution).reason as Error);
    abandon(execution);
    abort(execution, told);
    this.abandonedCount++;
    const checkedOut = this.transactions.get(execution);
    if (checkedOut) {
      // Closing its connection rolls its transaction back and frees its locks; its queries fail.
      this.transactions.delete(execution);
      checkedOut.release(new Error(`the worker abandoned the handler of job ${execution.job.jobId}`));
    }
    const reason = interruption === null ? 'shutdown' : REASONS[interruption];
    this.hub.emit({ name: 'job.abandoned', ...endedFields(execution), reason, abandonedCount: this.abandonedCount });
    this.recorder.finish(execution);
    // The attempt is over whatever the handler does: record what that means, as if it had returned.
    if (interruption !== 'timeout' && interruption !== 'canceled') return DONE;
    return this.recorder.recordFailure(execution, told, interruption).catch((error: unknown) => this.hub.reportError('fail', error as Error));
  }
}
