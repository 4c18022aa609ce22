import { filter, type OperatorFunction } from 'rxjs';
import { isWorkerEventName, WORKER_EVENT_NAMES, type WorkerEvent, type WorkerEventName, type WorkerEventOf } from '../core/events';

/**
 * Every worker event name, in lifecycle order (the core's list).
 *
 * @example
 * for (const name of WORKHORSE_EVENT_NAMES) counters.set(name, 0);
 */
export const WORKHORSE_EVENT_NAMES = WORKER_EVENT_NAMES;

/** True when `name` is the name of a worker event. */
export const isWorkhorseEventName = isWorkerEventName;

/**
 * An RxJS operator that keeps the events of the given names, typed as those events.
 *
 * @example
 * worker.events$
 *   .pipe(ofWorkhorseEvent('job.failed', 'job.retry_scheduled'))
 *   .subscribe((event) => metrics.increment(event.name, { type: event.type, error: event.error.name }));
 */
export function ofWorkhorseEvent<N extends WorkerEventName>(...names: N[]): OperatorFunction<WorkerEvent, WorkerEventOf<N>> {
  const wanted = new Set<WorkerEventName>(names);
  return filter((event: WorkerEvent): event is WorkerEventOf<N> => wanted.has(event.name));
}
