import type { Pool, PoolClient } from 'pg';
import { CheckedOutClient } from '../checked-out-client';
import type { ClaimedJob } from '../claimed-job';
import { HandlerContext } from '../context';
import { JobCanceledError } from '../errors';
import { failpoint } from '../failpoints';
import type { JsonValue, Queryable } from '../types';
import { toJsonText } from '../validation';
import type { EventHub } from './event-hub';
import { canceledOnCompletion, CLAIMED, interruptionOf, isLetGo, jobFields, signalOf, type Execution } from './execution';
import { Interrupter } from './interrupter';
import type { Lane } from './lane';
import { OutcomeRecorder } from './outcome-recorder';
import type { JobMetrics } from '../telemetry/job-metrics';
import { runInSpan, type JobTracing } from '../telemetry/job-tracing';
import type { OwnerStatements, RoundTripRow } from '../protocol/owner-statements';
import { BEGIN, COMMIT, ROLLBACK } from '../protocol/session';
import type { Handler, JobHandlerFn, WorkerSettings } from './worker-options';

export type { Handler };

/**
 * Executes the jobs the round trips claim: starts each one's handler (in a transaction of its
 * own for a transactional handler) and hands what came of it to the {@link OutcomeRecorder}.
 * What stops a handler from outside (timeouts, lost leases, cancellations, sleeps, abandonment)
 * is the {@link Interrupter}'s.
 *
 * A plain handler's job goes through callbacks, not an async function: the handler's promise
 * settles -> {@link handlerReturned} queues the completion for the lane's next round trip -> the
 * round trip answers -> the recorder reports the outcome and frees the slot. This runs for
 * every job, and each await would cost a promise and a hop through the microtask queue. Every
 * other path (no handler, a transactional handler, a failure) is an async function whose end
 * the recorder waits for.
 */
export class Executor {
  /** The jobs being executed, by job id (the heartbeater reads it as the leases to renew). */
  readonly executions = new Map<string, Execution>();
  readonly handlers = new Map<string, Handler>();
  readonly recorder: OutcomeRecorder;
  readonly interrupter: Interrupter;
  /** The job metrics while the worker runs with an OpenTelemetry SDK; null without one. */
  metrics: JobMetrics | null = null;
  /** The job tracing while the worker runs with an OpenTelemetry SDK; null without one. */
  tracing: JobTracing | null = null;

  constructor(
    private readonly pool: Pool,
    private readonly settings: WorkerSettings,
    private readonly statements: OwnerStatements,
    private readonly hub: EventHub,
  ) {
    this.recorder = new OutcomeRecorder(this.executions, this.handlers, statements, hub);
    this.interrupter = new Interrupter(this.executions, this.recorder, hub, settings.abandonAfterMs);
  }

  start(row: RoundTripRow, lane: Lane, sentAt: number, claimedAt: number): void {
    const [jobId, , queue, type, payload, attempt, maxAttempts, fenceToken, timeoutMs, checkpoints, sleeps, traceContext] = row;
    const job: ClaimedJob = { jobId, queue, type, attempt, maxAttempts, fenceToken, workerId: this.settings.workerId, checkpoints, sleeps };
    const execution: Execution = {
      deadline: sentAt + this.settings.leaseMs,
      renewing: true,
      job,
      lane,
      controller: null,
      startedAt: claimedAt,
      state: CLAIMED,
      timer: null,
      onFinished: null,
      span: this.tracing === null ? null : this.tracing.startAttempt(job, traceContext),
    };
    this.executions.set(jobId, execution);
    lane.active++;
    if (this.hub.wants('job.claimed')) this.hub.emit({ name: 'job.claimed', ...jobFields(execution) });
    this.metrics?.claimed(queue, type, jobId, attempt, claimedAt);
    if (timeoutMs !== null) this.interrupter.startTimeout(execution, timeoutMs, sentAt);
    this.execute(execution, payload);
  }

  // ---- executing -------------------------------------------------------------------------------

  private execute(execution: Execution, payload: JsonValue): void {
    const handler = this.handlers.get(execution.job.type);
    if (!handler) {
      const reason = `no handler for job type "${execution.job.type}" on worker ${this.settings.workerId}`;
      this.interrupter.handlerDone(execution);
      this.recorder.finishAfter(execution, this.recorder.release(execution, reason), 'release');
      return;
    }
    if (handler.settings.transactional) {
      this.recorder.finishAfter(execution, this.executeInTransaction(execution, handler.fn, payload), 'transaction');
      return;
    }
    let result: unknown;
    try {
      failpoint('before-handler');
      result = runInSpan(execution.span, handler.fn, payload, this.context(execution, this.pool));
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
    if (!this.interrupter.handlerDone(execution)) return;
    let resultText: string;
    try {
      resultText = this.resultText(execution, value);
    } catch (thrown) {
      this.recorder.failed(execution, thrown);
      return;
    }
    execution.lane.complete(execution, resultText);
  }

  private handlerThrew(execution: Execution, thrown: unknown): void {
    if (this.interrupter.handlerDone(execution)) this.recorder.failed(execution, thrown);
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
    return new HandlerContext(execution.job, this.interrupter, execution, db, this.pool, client);
  }

  // The handler's writes and the completion share one transaction: both commit, or neither.
  private async executeInTransaction(execution: Execution, fn: JobHandlerFn, payload: JsonValue): Promise<void> {
    const { job } = execution;
    const { interrupter } = this;
    let checkedOut: CheckedOutClient;
    try {
      // Listened to while checked out: a killed backend fails the attempt (reported as a worker
      // error during "transaction"), never the process.
      checkedOut = await CheckedOutClient.take(this.pool, (error) => this.hub.reportError('transaction', error));
    } catch (error) {
      if (interrupter.handlerDone(execution)) throw error;
      return;
    }
    if (interruptionOf(execution) === 'abandoned') {
      // Abandoned while it waited for a connection: the handler never runs.
      checkedOut.release();
      interrupter.handlerDone(execution);
      return;
    }
    const { client } = checkedOut;
    interrupter.transactions.set(execution, checkedOut);
    let status: string | null = null;
    let thrown: unknown = null;
    try {
      let value: unknown;
      let threw = false;
      try {
        await client.query(BEGIN);
        failpoint('before-handler');
        value = await runInSpan(execution.span, fn, payload, this.context(execution, client, client));
      } catch (error) {
        threw = true;
        thrown = error;
      }
      // Abandoned meanwhile: its connection is closed (its transaction rolled back), its ending recorded.
      if (!interrupter.handlerDone(execution)) return;
      const resultText = threw ? null : this.resultText(execution, value);
      if (resultText !== null) {
        failpoint('before-complete');
        status = await this.statements.completeIn(client, job, resultText);
      }
      if (status === 'succeeded') {
        await client.query(COMMIT);
        failpoint('after-complete');
      } else {
        // Failed, stale or canceled meanwhile: none of the handler's writes may stay.
        await client.query(ROLLBACK);
      }
    } catch (error) {
      await client.query(ROLLBACK).catch(() => undefined);
      thrown ??= error;
      status = null;
    } finally {
      // Given back to the pool, unless abandonment closed it; a broken connection is destroyed.
      if (interrupter.transactions.delete(execution)) checkedOut.release();
    }
    if (status === 'succeeded' || status === 'stale') {
      this.recorder.reportOutcome(execution, status, null);
    } else if (status === 'canceled') {
      canceledOnCompletion(execution);
      await this.recorder.recordFailure(execution, new JobCanceledError(job.jobId));
    } else {
      await this.recorder.recordFailure(execution, thrown);
    }
  }
}
