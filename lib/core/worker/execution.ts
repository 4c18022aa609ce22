import type { Span } from '@opentelemetry/api';
import type { ClaimedJob } from '../claimed-job';
import type { HeldLease } from './heartbeater';

/**
 * Why the worker stopped a handler, or stopped caring about what it returns: its lease was
 * lost, its job was canceled, its execution timeout passed, it went to sleep, or the worker
 * abandoned it (it did not return in time after one of those, or at shutdown).
 */
export type Interruption = 'lost' | 'canceled' | 'timeout' | 'sleeping' | 'abandoned';

/**
 * Where an execution is: its handler runs (`running`), returned or threw and its ending is being
 * recorded (`returned`), or the worker is done with the job and its slot is free (`finished`).
 */
export type ExecutionPhase = 'running' | 'returned' | 'finished';

/**
 * An execution's one state: its phase and why the worker interrupted it, if it did. Only the
 * transitions below change it (each checks that it may happen; see {@link ExecutionStateError}).
 */
export interface ExecutionState {
  readonly phase: ExecutionPhase;
  readonly interruption: Interruption | null;
}

/**
 * A transition the execution's state does not allow: a programming error of the worker (a
 * handler's ending recorded twice, an interruption after the worker abandoned the handler).
 * Thrown under test (NODE_ENV=test); elsewhere the state stays as it was, so a worker in
 * production keeps running its other jobs.
 */
export class ExecutionStateError extends Error {
  constructor(jobId: string, state: ExecutionState, transition: string) {
    super(`job ${jobId}: cannot ${transition} an execution that is ${state.phase}${state.interruption ? ` (${state.interruption})` : ''}`);
    this.name = 'ExecutionStateError';
  }
}

/**
 * One job this worker executes, from its claim until the worker is done with it (its outcome
 * recorded, or given up): the job, its lease (as the heartbeater renews it), its slot and its
 * state. Every part of the worker that handles the job takes this record as an argument, so a
 * job costs no closures of its own beyond the two that receive its handler's promise.
 */
export interface Execution extends HeldLease {
  readonly job: ClaimedJob;
  readonly lane: ExecutionLane;
  /** Made when first needed (the handler reads ctx.signal, or the worker aborts): most jobs never need one. */
  controller: AbortController | null;
  startedAt: number;
  /** Changed only by the transitions of this module. */
  state: ExecutionState;
  /**
   * The execution timeout's local timer, if the job has one; once the handler is interrupted,
   * the timer that abandons it if it does not return in time.
   */
  timer: NodeJS.Timeout | null;
  /** Called once when finished; set only while someone waits (see whenFinished). */
  onFinished: (() => void) | null;
  /** The attempt's CONSUMER span (ended when the job is finished), or null without an OpenTelemetry SDK. */
  span: Span | null;
}

/** What an execution needs of its lane (the lane implements it): its group, its slots and its round trips. */
export interface ExecutionLane {
  readonly group: string;
  active: number;
  wake(): void;
  complete(execution: Execution, resultText: string): void;
}

/** The state of a job just claimed. */
export const CLAIMED: ExecutionState = { phase: 'running', interruption: null };

function refuse(execution: Execution, transition: string): false {
  const error = new ExecutionStateError(execution.job.jobId, execution.state, transition);
  if (process.env.NODE_ENV === 'test') throw error;
  return false;
}

/** Why the worker interrupted the handler, if it did. */
export function interruptionOf(execution: Execution): Interruption | null {
  return execution.state.interruption;
}

/** True once the worker is done with the job. */
export function isFinished(execution: Execution): boolean {
  return execution.state.phase === 'finished';
}

/** True when the worker lost the job's lease or abandoned its handler: no completion of it may be sent. */
export function isLost(execution: Execution): boolean {
  const i = execution.state.interruption;
  return i === 'lost' || i === 'abandoned';
}

/** True while the handler runs (interrupted or not). */
export function isRunning(execution: Execution): boolean {
  return execution.state.phase === 'running';
}

/**
 * The worker tells the handler to stop: `lost` (its lease), `canceled`, `timeout` or `sleeping`
 * (it slept or parked). Allowed once while nothing interrupted it, and `lost` also after another
 * reason (a lost lease overrides); never once the worker abandoned the handler. Ignored once the
 * job is finished (nothing is left to tell: a late answer of a call the handler did not await).
 * Answers whether the state changed.
 */
export function interrupt(execution: Execution, why: Exclude<Interruption, 'abandoned'>): boolean {
  const { phase, interruption } = execution.state;
  if (phase === 'finished') return false;
  const allowed = interruption === null || (why === 'lost' && interruption !== 'lost' && interruption !== 'abandoned');
  if (!allowed) return refuse(execution, `interrupt (${why})`);
  execution.state = { phase, interruption: why };
  // A job that slept or parked is the database's again, and a lost lease is no one's to renew.
  if (why === 'sleeping' || why === 'lost') execution.renewing = false;
  return true;
}

/** The database answered that the job was canceled while its result was being recorded. */
export function canceledOnCompletion(execution: Execution): void {
  const { phase, interruption } = execution.state;
  if (phase !== 'returned' || interruption === 'lost' || interruption === 'abandoned' || interruption === 'sleeping') {
    refuse(execution, 'record a cancellation of');
    return;
  }
  execution.state = { phase, interruption: 'canceled' };
}

/** The worker gives up waiting for the running handler (interrupted or at shutdown). */
export function abandon(execution: Execution): void {
  const { phase, interruption } = execution.state;
  if (phase !== 'running' || interruption === 'abandoned') {
    refuse(execution, 'abandon');
    return;
  }
  execution.state = { phase, interruption: 'abandoned' };
}

/**
 * The handler returned or threw (or never ran). False when the worker had abandoned it (the job
 * may be finished by then): what it did no longer counts.
 */
export function handlerReturned(execution: Execution): boolean {
  const { phase, interruption } = execution.state;
  if (interruption === 'abandoned' && phase !== 'returned') return false;
  if (phase !== 'running') return refuse(execution, 'return from');
  execution.state = { phase: 'returned', interruption };
  return true;
}

/** The worker is done with the job (its lease is no longer renewed). False when it already was (finishing is idempotent). */
export function finish(execution: Execution): boolean {
  const { phase, interruption } = execution.state;
  if (phase === 'finished') return false;
  execution.state = { phase: 'finished', interruption };
  execution.renewing = false;
  return true;
}

const FINISHED: Promise<void> = Promise.resolve();

/**
 * Resolves when the worker is done with the job. Made only when something waits for it (stop,
 * runOnce): a job that nobody waits for costs no promise.
 */
export function whenFinished(execution: Execution): Promise<void> {
  if (isFinished(execution)) return FINISHED;
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
  const i = execution.state.interruption;
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
