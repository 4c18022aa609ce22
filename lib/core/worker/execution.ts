import type { Span } from '@opentelemetry/api';
import type { ClaimedJob } from '../context';
import type { HeldLease } from './heartbeater';
import type { Lane } from './lane';

/**
 * Why the worker stopped a handler, or stopped caring about what it returns: its lease was
 * lost, its job was canceled, its execution timeout passed, it went to sleep, or the worker
 * abandoned it (it did not return in time after one of those, or at shutdown).
 */
export type Interruption = 'lost' | 'canceled' | 'timeout' | 'sleeping' | 'abandoned';

/**
 * One job this worker executes, from its claim until the worker is done with it (its outcome
 * recorded, or given up): the job, its lease (as the heartbeater renews it) and its slot. Every
 * part of the worker that handles the job takes this record as an argument, so a job costs no
 * closures of its own beyond the two that receive its handler's promise.
 */
export interface Execution extends HeldLease {
  readonly job: ClaimedJob;
  readonly lane: Lane;
  /** Made when first needed (the handler reads ctx.signal, or the worker aborts): most jobs never need one. */
  controller: AbortController | null;
  startedAt: number;
  /** Why the worker interrupted the handler, if it did. */
  interruption: Interruption | null;
  /**
   * The execution timeout's local timer, if the job has one; once the handler is interrupted,
   * the timer that abandons it if it does not return in time.
   */
  timer: NodeJS.Timeout | null;
  /** The handler returned or threw (or never ran): its ending is being recorded. */
  returned: boolean;
  /** The worker is done with the job: its slot is free. */
  finished: boolean;
  /** Called once when finished; set only while someone waits (see whenFinished). */
  onFinished: (() => void) | null;
  /** The attempt's CONSUMER span (ended when the job is finished), or null without an OpenTelemetry SDK. */
  span: Span | null;
}

const FINISHED: Promise<void> = Promise.resolve();

/**
 * Resolves when the worker is done with the job. Made only when something waits for it (stop,
 * runOnce): a job that nobody waits for costs no promise.
 */
export function whenFinished(execution: Execution): Promise<void> {
  if (execution.finished) return FINISHED;
  return new Promise((resolve) => {
    const before = execution.onFinished;
    execution.onFinished = before
      ? () => {
          before();
          resolve();
        }
      : resolve;
  });
}

/** The job's AbortSignal (made on first use). */
export function signalOf(execution: Execution): AbortSignal {
  return (execution.controller ??= new AbortController()).signal;
}

/** Aborts the handler's signal with `reason`. */
export function abort(execution: Execution, reason: Error): void {
  (execution.controller ??= new AbortController()).abort(reason);
}

/** True when the worker no longer owns the job's outcome: nothing the handler returns may be recorded. */
export function isLetGo(execution: Execution): boolean {
  const i = execution.interruption;
  return i === 'lost' || i === 'abandoned' || i === 'sleeping';
}

/** The fields every job event carries. */
export function jobFields(execution: Execution) {
  const { job } = execution;
  return { jobId: job.jobId, type: job.type, queue: job.queue, group: execution.lane.group, attempt: job.attempt, workerId: job.workerId };
}

/** jobFields and how long the job ran here, for the events of a job that is over for this worker. */
export function endedFields(execution: Execution) {
  return { ...jobFields(execution), durationMs: Date.now() - execution.startedAt };
}
