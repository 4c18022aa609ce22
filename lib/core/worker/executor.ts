import type { Pool, PoolClient } from 'pg';
import { HandlerContext, JobSleeping, type ClaimedJob, type ExecutionOwner } from '../context';
import { ExecutionTimeoutError, JobCanceledError, LeaseLostError, WorkerShutdownError } from '../errors';
import { failpoint } from '../failpoints';
import type { JsonValue, Queryable } from '../types';
import { toJsonText } from '../validation';
import type { EventHub } from './event-hub';
import { abort, endedFields, isLetGo, jobFields, signalOf, type Execution } from './execution';
import type { LeaseListener } from './heartbeater';
import type { Lane } from './lane';
import { OutcomeRecorder } from './outcome-recorder';
import type { OwnerStatements, RoundTripRow } from './owner-statements';
import type { HandlerSettings, JobHandlerFn, WorkerSettings } from './worker-options';

/** A registered handler. */
export interface Handler {
  fn: JobHandlerFn<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  settings: HandlerSettings;
}

/**
 * Executes the jobs the round trips claim: starts each one's handler (in a transaction of its
 * own for a transactional handler) and hands what came of it to the {@link OutcomeRecorder}.
 * It is also the heartbeater's listener (lost leases, cancel requests), every job's context's
 * owner (signal, lost lease, sleep), and the one that abandons handlers.
 *
 * A plain handler's job goes through callbacks, not an async function: the handler's promise
 * settles -> {@link handlerReturned} queues the completion for the lane's next round trip -> the
 * round trip answers -> the recorder reports the outcome and frees the slot. This runs for
 * every job, and each await would cost a promise and a hop through the microtask queue. Every
 * other path (no handler, a transactional handler, a failure) is an async function whose end
 * the recorder waits for.
 */
export class Executor implements LeaseListener, ExecutionOwner {
  /** The jobs being executed, by job id (the heartbeater reads it as the leases to renew). */
  readonly executions = new Map<string, Execution>();
  readonly handlers = new Map<string, Handler>();
  readonly recorder: OutcomeRecorder;

  constructor(
    private readonly pool: Pool,
    private readonly settings: WorkerSettings,
    private readonly statements: OwnerStatements,
    private readonly hub: EventHub,
  ) {
    this.recorder = new OutcomeRecorder(this.executions, this.handlers, statements, hub);
  }

  start(row: RoundTripRow, lane: Lane, sentAt: number, claimedAt: number): void {
    const [jobId, , queue, type, payload, attempt, maxAttempts, fenceToken, timeoutMs, checkpoints, waits] = row;
    const job: ClaimedJob = { jobId, queue, type, attempt, maxAttempts, fenceToken, workerId: this.settings.workerId, checkpoints, waits };
    const execution: Execution = {
      deadline: sentAt + this.settings.leaseMs,
      renewing: true,
      job,
      lane,
      controller: null,
      startedAt: claimedAt,
      interruption: null,
      timer: null,
      finished: false,
      onFinished: null,
    };
    this.executions.set(jobId, execution);
    lane.active++;
    if (this.hub.wants('job.claimed')) this.hub.emit({ name: 'job.claimed', ...jobFields(job) });
    // The server closes the attempt at the same moment by its own clock (counted from the claim,
    // which happened before `claimedAt`); this timer only tells the handler sooner.
    if (timeoutMs !== null) {
      execution.timer = setTimeout(() => {
        if (execution.interruption === null) {
          execution.interruption = 'timeout';
          abort(execution, new ExecutionTimeoutError(jobId, timeoutMs));
        }
      }, Math.max(0, sentAt + timeoutMs - Date.now()));
    }
    this.execute(execution, payload);
  }

  // ---- the heartbeater's listener, and the contexts' owner --------------------------------------

  lost(jobId: string): void {
    const execution = this.executions.get(jobId);
    if (execution) this.loseLease(execution);
  }

  cancelRequested(jobId: string): void {
    const execution = this.executions.get(jobId);
    if (execution && execution.interruption === null) {
      execution.interruption = 'canceled';
      abort(execution, new JobCanceledError(jobId));
    }
  }

  signalOf(execution: object): AbortSignal {
    return signalOf(execution as Execution);
  }

  leaseLost(execution: object): void {
    this.loseLease(execution as Execution);
  }

  private loseLease(execution: Execution): void {
    if (execution.interruption === 'lost' || execution.interruption === 'abandoned') return;
    execution.interruption = 'lost';
    abort(execution, new LeaseLostError(execution.job.jobId));
  }

  slept(execution: object, wakeAt: Date): void {
    const e = execution as Execution;
    if (e.interruption !== null) return;
    e.interruption = 'sleeping';
    e.renewing = false;
    abort(e, new JobSleeping(e.job.jobId, wakeAt));
    this.hub.emit({ name: 'job.sleeping', ...jobFields(e.job), wakeAt });
  }

  /**
   * Shutdown gave up waiting: aborts every running handler (WorkerShutdownError), records
   * nothing for them (their leases expire and another worker runs them again) and frees their
   * slots. What an abandoned handler does later is ignored.
   */
  abandonAll(): void {
    for (const execution of [...this.executions.values()]) {
      execution.interruption ??= 'abandoned';
      abort(execution, new WorkerShutdownError(execution.job.jobId));
      this.hub.emit({ name: 'job.abandoned', ...endedFields(execution) });
      this.recorder.finish(execution);
    }
  }

  // ---- executing -------------------------------------------------------------------------------

  private execute(execution: Execution, payload: JsonValue): void {
    const handler = this.handlers.get(execution.job.type);
    if (!handler) {
      const reason = `no handler for job type "${execution.job.type}" on worker ${this.settings.workerId}`;
      this.recorder.finishAfter(execution, this.recorder.release(execution, reason));
      return;
    }
    if (handler.settings.transactional) {
      this.recorder.finishAfter(execution, this.executeInTransaction(execution, handler.fn, payload));
      return;
    }
    let result: unknown;
    try {
      failpoint('before-handler');
      result = handler.fn(payload, this.context(execution, this.pool));
    } catch (thrown) {
      this.handlerThrew(execution, thrown);
      return;
    }
    Promise.resolve(result).then(
      (value) => this.handlerReturned(execution, value),
      (thrown) => this.handlerThrew(execution, thrown),
    );
  }

  private handlerReturned(execution: Execution, value: unknown): void {
    let resultText: string;
    try {
      resultText = this.resultText(execution, value);
    } catch (thrown) {
      this.handlerThrew(execution, thrown);
      return;
    }
    execution.lane.complete(execution, resultText);
  }

  private handlerThrew(execution: Execution, thrown: unknown): void {
    this.recorder.failed(execution, thrown);
  }

  /**
   * A handler's returned value as the job's result (JSON text). Throws what the attempt fails
   * with instead: the value is not JSON, or the worker let go of the job (lease lost,
   * abandoned, asleep) while the handler ran.
   */
  private resultText(execution: Execution, value: unknown): string {
    failpoint('after-handler');
    if (isLetGo(execution)) throw signalOf(execution).reason;
    return value === undefined ? 'null' : toJsonText(value, 'result');
  }

  private context(execution: Execution, db: Queryable, client?: PoolClient): HandlerContext {
    return new HandlerContext(execution.job, this, execution, db, this.pool, client);
  }

  // The handler's writes and the completion share one transaction: both commit, or neither.
  private async executeInTransaction(execution: Execution, fn: JobHandlerFn, payload: JsonValue): Promise<void> {
    const { job } = execution;
    const client = await this.pool.connect();
    // A checked-out client whose connection breaks emits `error`; without a listener that would
    // crash the process. The failure reaches us through the next query instead.
    let broken: Error | undefined;
    const onClientError = (error: Error) => {
      broken = error;
      this.hub.reportError('transaction', error);
    };
    client.on('error', onClientError);
    let status: string | null = null;
    let thrown: unknown = null;
    try {
      await client.query('BEGIN');
      let resultText: string | null = null;
      try {
        failpoint('before-handler');
        resultText = this.resultText(execution, await fn(payload, this.context(execution, client, client)));
      } catch (error) {
        thrown = error;
      }
      if (resultText !== null) {
        failpoint('before-complete');
        status = await this.statements.completeIn(client, job, resultText);
      }
      if (status === 'succeeded') {
        await client.query('COMMIT');
        failpoint('after-complete');
      } else {
        // Failed, stale or canceled meanwhile: none of the handler's writes may stay.
        await client.query('ROLLBACK');
      }
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      thrown ??= error;
      status = null;
    } finally {
      client.off('error', onClientError);
      // A broken connection is destroyed rather than given back to the pool.
      client.release(broken);
    }
    if (status === 'succeeded' || status === 'stale') {
      this.recorder.reportOutcome(execution, status, null);
    } else if (status === 'canceled') {
      execution.interruption = 'canceled';
      await this.recorder.recordFailure(execution, new JobCanceledError(job.jobId));
    } else {
      await this.recorder.recordFailure(execution, thrown);
    }
  }
}
