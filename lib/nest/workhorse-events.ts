import { filter, type OperatorFunction } from 'rxjs';
import type { WorkerEvent, WorkerEventName, WorkerEventOf } from '../core/events';

/**
 * Every worker event name, in lifecycle order. Typed so that the build breaks when the core
 * event union gains or loses a name and this list (and the table in docs/nest.md) is not updated.
 *
 * @example
 * for (const name of WORKHORSE_EVENT_NAMES) counters.set(name, 0);
 */
export const WORKHORSE_EVENT_NAMES = [
  'worker.started',
  'job.claimed',
  'job.succeeded',
  'job.retry_scheduled',
  'job.failed',
  'job.canceled',
  'job.lease_lost',
  'job.released',
  'job.sleeping',
  'job.sleeping',
  'job.abandoned',
  'worker.error',
  'worker.stopped',
] as const satisfies readonly WorkerEventName[];

type Missing = Exclude<WorkerEventName, (typeof WORKHORSE_EVENT_NAMES)[number]>;
// Fails to compile (naming the missing event) when the list above misses a name of the union.
const everyNameListed: [Missing] extends [never] ? true : Missing = true;
void everyNameListed;

/** True when `name` is the name of a worker event. */
export function isWorkhorseEventName(name: unknown): name is WorkerEventName {
  return (WORKHORSE_EVENT_NAMES as readonly unknown[]).includes(name);
}

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
