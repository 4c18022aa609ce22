import { filter, type OperatorFunction } from 'rxjs';
import type { WorkerEvent, WorkerEventName, WorkerEventOf } from '../core/events';

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
