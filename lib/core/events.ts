import type { ErrorEnvelope } from './types';

/**
 * What a worker was doing when an internal operation failed (`worker.error`): checking the
 * schema at start (`start`); claiming, or recording completions, in its round trip (`claim`,
 * `complete`); recording a failed attempt or
 * an acknowledged cancellation (`fail`); handing back a job it has no handler for (`release`);
 * running a transactional handler's transaction (`transaction`); renewing leases
 * (`heartbeat`); offering maintenance (`tick`); reporting itself to the registry of live
 * workers (`report`); listening for notifications (`listen`); calling
 * a listener (`listener`); or an idle connection of the pool broke (`pool`).
 */
export type WorkerErrorDuring =
  | 'start'
  | 'claim'
  | 'complete'
  | 'fail'
  | 'release'
  | 'transaction'
  | 'heartbeat'
  | 'tick'
  | 'report'
  | 'listen'
  | 'pool'
  | 'listener';

/**
 * The tasks a worker repeats while it runs (checking the schema at start until the database
 * answers, its round trips, heartbeats, ticks, registry reports and LISTEN connection): when one
 * of them works again after failing, the database is reachable again (`worker.reconnected`).
 */
export const RECURRING_TASKS = ['start', 'claim', 'complete', 'heartbeat', 'tick', 'report', 'listen'] as const satisfies readonly WorkerErrorDuring[];
export type RecurringTask = (typeof RECURRING_TASKS)[number];

/**
 * @deprecated Use {@link RecurringTask} (the same type; "operation" names only what a checkpoint
 * runs once, see docs/concepts.md#words). Kept so that code of the previous release compiles.
 */
export type RecurringOperation = RecurringTask;

/**
 * Why the worker abandoned a handler (`job.abandoned`): it had not returned in time after its
 * attempt timed out, its job was canceled, its lease was lost or it went to sleep, or the worker
 * stopped (`shutdownTimeoutMs`).
 */
export type AbandonReason = 'timeout' | 'canceled' | 'lease_lost' | 'sleeping' | 'shutdown';

interface JobEventBase {
  jobId: string;
  /** The job's type (the handler name). */
  type: string;
  queue: string;
  /** The worker group that claimed it (`groups`; by default named after its queues). */
  group: string;
  attempt: number;
  workerId: string;
}

/** A worker group as `worker.started` describes it. */
export interface WorkerGroupInfo {
  name: string;
  queues: string[];
  concurrency: number;
}

/**
 * Everything a worker reports, as one union discriminated by `name`. Subscribe with
 * `worker.on(listener)` (core) or `WorkhorseWorker.events$` / `@OnWorkhorseEvent(name)` (Nest).
 */
export type WorkerEvent =
  | {
      name: 'worker.started';
      workerId: string;
      /** Every group's queues. */
      queues: string[];
      /** Every group's concurrency, added up. */
      concurrency: number;
      groups: WorkerGroupInfo[];
    }
  | ({ name: 'job.claimed' } & JobEventBase)
  | ({ name: 'job.succeeded'; durationMs: number } & JobEventBase)
  | ({ name: 'job.retry_scheduled'; durationMs: number; error: ErrorEnvelope; runAt: Date; delayMs: number } & JobEventBase)
  | ({ name: 'job.failed'; durationMs: number; error: ErrorEnvelope } & JobEventBase)
  | ({ name: 'job.canceled'; durationMs: number } & JobEventBase)
  | ({ name: 'job.lease_lost'; durationMs: number } & JobEventBase)
  | ({ name: 'job.released'; reason: string } & JobEventBase)
  | ({ name: 'job.sleeping'; wakeAt: Date } & JobEventBase)
  | ({ name: 'job.blocked'; waitingFor: 'children' | 'signal' | 'human' } & JobEventBase)
  | ({
      name: 'job.abandoned';
      durationMs: number;
      reason: AbandonReason;
      /** Handlers this worker abandoned that are still running, this one included. */
      abandonedCount: number;
    } & JobEventBase)
  | {
      name: 'worker.error';
      workerId: string;
      /** What the worker was doing (see {@link WorkerErrorDuring}). */
      during: WorkerErrorDuring;
      error: Error;
    }
  | {
      name: 'worker.reconnected';
      workerId: string;
      /** The task that works again (it had failed: `worker.error` during the same). */
      during: RecurringTask;
      /** Its failures (`worker.error` events) since it first failed. */
      failures: number;
      /** How long it failed, from its first failure to now. */
      downMs: number;
    }
  | { name: 'worker.stopped'; workerId: string }
  /** An operator asked the worker to drain: it claims no more and finishes the `activeCount` jobs it holds. */
  | { name: 'worker.draining'; workerId: string; activeCount: number };

export type WorkerEventName = WorkerEvent['name'];

/**
 * Every worker event name, in lifecycle order. Typed so that the build breaks when the event
 * union above gains or loses a name and this list (and the table in docs/nest.md) is not updated.
 */
export const WORKER_EVENT_NAMES = [
  'worker.started',
  'job.claimed',
  'job.succeeded',
  'job.retry_scheduled',
  'job.failed',
  'job.canceled',
  'job.lease_lost',
  'job.released',
  'job.sleeping',
  'job.blocked',
  'job.abandoned',
  'worker.error',
  'worker.reconnected',
  'worker.stopped',
  'worker.draining',
] as const satisfies readonly WorkerEventName[];

type Missing = Exclude<WorkerEventName, (typeof WORKER_EVENT_NAMES)[number]>;
// Fails to compile (naming the missing event) when the list above misses a name of the union.
const everyNameListed: [Missing] extends [never] ? true : Missing = true;
void everyNameListed;

/** True when `name` is the name of a worker event. */
export function isWorkerEventName(name: unknown): name is WorkerEventName {
  return (WORKER_EVENT_NAMES as readonly unknown[]).includes(name);
}

/** The event of one name, e.g. `WorkerEventOf<'job.failed'>`. */
export type WorkerEventOf<N extends WorkerEventName> = Extract<WorkerEvent, { name: N }>;

export type WorkerEventListener = (event: WorkerEvent) => void;
