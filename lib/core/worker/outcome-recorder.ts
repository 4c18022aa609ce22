import type { WorkerErrorDuring } from '../events';
import type { ErrorEnvelope } from '../types';
import { retryControlOf, toErrorEnvelope } from './error-envelope';
import type { EventHub } from './event-hub';
import { endedFields, finish, interruptionOf, jobFields, type Execution, type Interruption } from './execution';
import type { Handler } from './worker-options';
import type { FailOptions, OwnerStatements } from '../protocol/owner-statements';
import type { JobMetrics } from '../telemetry/job-metrics';
import { recordError } from '../telemetry/job-tracing';

/**
 * Records how each job ended, reports it as an event and frees the job's slot: a success that
 * its lane's round trip recorded, or a failure, a release or a cancellation with a statement of
 * its own. Recording is what a job's last step does, whatever its way through the worker
 * (River calls this part the completer).
 */
export class OutcomeRecorder {
  /** The job metrics while the worker runs with an OpenTelemetry SDK; null without one. */
  metrics: JobMetrics | null = null;

  constructor(
    /** The jobs being executed, by job id (the executor's). */
    private readonly executions: Map<string, Execution>,
    /** The registered handlers (for their retry policies). */
    private readonly handlers: ReadonlyMap<string, Handler>,
    private readonly statements: OwnerStatements,
    private readonly hub: EventHub,
  ) {}

  /** The lane's round trip recorded the job's completion (or found it `stale` or `canceled`). */
  completed(execution: Execution, status: string): void {
    this.reportOutcome(execution, status, null);
    this.finish(execution);
  }

  /** The database refused the job's result (a typed error): that fails the attempt. */
  refused(execution: Execution, error: Error): void {
    this.finishAfter(execution, this.recordFailure(execution, error), 'fail');
  }

  /** The handler threw (or its result could not be used): records the failed attempt. */
  failed(execution: Execution, thrown: unknown): void {
    this.finishAfter(execution, this.recordFailure(execution, thrown), 'fail');
  }

  /**
   * Frees the job's slot once `work` (which records or reports how the job ended) is over; a
   * failure of `work` is reported as a `worker.error` during `during`.
   */
  finishAfter(execution: Execution, work: Promise<void>, during: WorkerErrorDuring): void {
    work.then(
      () => this.finish(execution),
      (error: unknown) => {
        // A write that could not reach the database: the lease will expire and the job run again.
        this.hub.reportError(during, error as Error);
        this.finish(execution);
      },
    );
  }

  /** The job is over for this worker (recorded, given up or abandoned): its slot is free. */
  finish(execution: Execution): void {
    if (!finish(execution)) return;
    if (execution.timer) clearTimeout(execution.timer);
    const { job, lane } = execution;
    execution.span?.end();
    if (this.executions.get(job.jobId) === execution) this.executions.delete(job.jobId);
    lane.active--;
    lane.wake();
    if (execution.onFinished) {
      const onFinished = execution.onFinished;
      execution.onFinished = null;
      onFinished();
    }
  }

  /**
   * Records a failed attempt, or what else the `interruption` of its handler (the execution's
   * own, unless given) means: a cancellation acknowledged, a timed-out attempt, nothing for a job
   * the worker let go of.
   */
  async recordFailure(execution: Execution, thrown: unknown, interruption: Interruption | null = interruptionOf(execution)): Promise<void> {
    const { job } = execution;
    // The job sleeps: the database already holds its new state, there is nothing to record.
    if (interruption === 'sleeping') {
      execution.span?.setAttribute('workhorse.job.outcome', 'parked');
      return;
    }
    if (interruption === 'lost' || interruption === 'abandoned') {
      this.reportLost(execution);
      return;
    }
    if (interruption === 'canceled') {
      this.reportOutcome(execution, await this.statements.acknowledgeCancel(job), null);
      return;
    }
    if (execution.span !== null) recordError(execution.span, thrown);
    const options: FailOptions = retryControlOf(thrown);
    if (interruption === 'timeout') options.attemptOutcome = 'timeout';
    const retry = this.handlers.get(job.type)?.settings.retry;
    if (retry) options.retryPolicy = retry;
    // Bounded and storable whatever was thrown, so the database never refuses the failure.
    const error = toErrorEnvelope(thrown);
    const answer = await this.statements.fail(job, error, options);
    if (answer.status === 'retry_scheduled') {
      execution.span?.setAttribute('workhorse.job.outcome', 'retry_scheduled');
      this.metrics?.retried(job.queue, job.type, Date.now() - execution.startedAt);
      this.hub.emit({ name: 'job.retry_scheduled', ...endedFields(execution), error, runAt: answer.runAt as Date, delayMs: answer.delayMs });
    } else {
      this.reportOutcome(execution, answer.status, error);
    }
  }

  /** Hands the job back without using its attempt (the worker has no handler for its type). */
  async release(execution: Execution, reason: string): Promise<void> {
    const status = await this.statements.release(execution.job, reason);
    if (status === 'released') {
      execution.span?.setAttribute('workhorse.job.outcome', 'released');
      this.hub.emit({ name: 'job.released', ...jobFields(execution), reason });
    } else {
      this.reportOutcome(execution, status, null);
    }
  }

  /** Reports how a job ended, as an event (nothing to build when nobody listens: it runs for every job). */
  reportOutcome(execution: Execution, status: string, error: ErrorEnvelope | null): void {
    const { hub, metrics } = this;
    execution.span?.setAttribute('workhorse.job.outcome', status === 'stale' ? 'lease_lost' : status);
    if (metrics !== null && (status === 'succeeded' || status === 'failed')) {
      const { queue, type } = execution.job;
      if (status === 'succeeded') metrics.succeeded(queue, type, Date.now() - execution.startedAt);
      else metrics.failed(queue, type, Date.now() - execution.startedAt);
    }
    if (status === 'succeeded') {
      if (hub.wants('job.succeeded')) hub.emit({ name: 'job.succeeded', ...endedFields(execution) });
    } else if (status === 'canceled') {
      if (hub.wants('job.canceled')) hub.emit({ name: 'job.canceled', ...endedFields(execution) });
    } else if (status === 'failed' && error) {
      if (hub.wants('job.failed')) hub.emit({ name: 'job.failed', ...endedFields(execution), error });
    } else if (status === 'stale') {
      this.reportLost(execution);
    }
  }

  private reportLost(execution: Execution): void {
    execution.span?.setAttribute('workhorse.job.outcome', 'lease_lost');
    if (interruptionOf(execution) === 'abandoned') return;
    this.hub.emit({ name: 'job.lease_lost', ...endedFields(execution) });
  }
}
