import { WorkhorseValidationError } from '../errors';
import {
  isWorkerEventName,
  RECURRING_TASKS,
  type RecurringTask,
  type WorkerErrorDuring,
  type WorkerEvent,
  type WorkerEventListener,
  type WorkerEventName,
  type WorkerEventOf,
} from '../events';

function isRecurring(during: WorkerErrorDuring): during is RecurringTask {
  return (RECURRING_TASKS as readonly string[]).includes(during);
}

interface Subscription {
  listener: WorkerEventListener;
  /** The event names it wants; null: all of them. */
  names: ReadonlySet<WorkerEventName> | null;
}

/**
 * A worker's listeners, and which events they want. An event that no listener wants is not
 * even built: the per-job events (`job.claimed` and how each job ended) would cost the worker
 * some CPU for every job, so the code that would emit one asks {@link wants} first.
 */
export class EventHub {
  private readonly subscriptions = new Set<Subscription>();
  /** The event names some listener wants ('all', or none at all: null). */
  private wanted: ReadonlySet<WorkerEventName> | 'all' | null = null;
  /** Recurring operations failing now: since when, and how many failures. */
  private readonly failing = new Map<RecurringTask, { since: number; failures: number }>();

  constructor(private readonly workerId: string) {}

  on(listener: WorkerEventListener): () => void;
  on<N extends WorkerEventName>(names: readonly N[], listener: (event: WorkerEventOf<N>) => void): () => void;
  on(namesOrListener: readonly WorkerEventName[] | WorkerEventListener, listener?: (event: never) => void): () => void {
    let subscription: Subscription;
    if (typeof namesOrListener === 'function') {
      subscription = { listener: namesOrListener, names: null };
    } else {
      if (!Array.isArray(namesOrListener) || namesOrListener.length === 0) {
        throw new WorkhorseValidationError('names', 'must list at least one event name');
      }
      namesOrListener.forEach((name: unknown, i) => {
        if (!isWorkerEventName(name)) throw new WorkhorseValidationError(`names[${i}]`, 'is not the name of a worker event');
      });
      if (typeof listener !== 'function') throw new WorkhorseValidationError('listener', 'must be a function');
      subscription = { listener: listener as WorkerEventListener, names: new Set(namesOrListener) };
    }
    this.subscriptions.add(subscription);
    this.updateWanted();
    return () => {
      this.subscriptions.delete(subscription);
      this.updateWanted();
    };
  }

  /** Whether some listener wants events of this name (asked before building one that every job would cost). */
  wants(name: WorkerEventName): boolean {
    const wanted = this.wanted;
    return wanted !== null && (wanted === 'all' || wanted.has(name));
  }

  /** Gives the event to every listener that wants it; a listener that throws is reported, never propagated. */
  emit(event: WorkerEvent): void {
    for (const { listener, names } of this.subscriptions) {
      if (names !== null && !names.has(event.name)) continue;
      try {
        listener(event);
      } catch (error) {
        if (event.name !== 'worker.error') this.reportError('listener', error as Error);
      }
    }
  }

  /** An internal operation failed; the worker goes on. */
  reportError(during: WorkerErrorDuring, error: Error): void {
    if (isRecurring(during)) {
      const failing = this.failing.get(during);
      if (failing) failing.failures++;
      else this.failing.set(during, { since: Date.now(), failures: 1 });
    }
    this.emit({ name: 'worker.error', workerId: this.workerId, during, error });
  }

  /**
   * A recurring operation worked: if it had been failing, the database is reachable again, and
   * `worker.reconnected` says so (once per outage and operation).
   */
  reportSuccess(during: RecurringTask): void {
    if (this.failing.size === 0) return;
    const failing = this.failing.get(during);
    if (!failing) return;
    this.failing.delete(during);
    this.emit({ name: 'worker.reconnected', workerId: this.workerId, during, failures: failing.failures, downMs: Date.now() - failing.since });
  }

  private updateWanted(): void {
    const names = new Set<WorkerEventName>();
    for (const { names: only } of this.subscriptions) {
      if (only === null) {
        this.wanted = 'all';
        return;
      }
      for (const name of only) names.add(name);
    }
    this.wanted = names.size > 0 ? names : null;
  }
}
