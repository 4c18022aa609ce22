import { isWorkerEventName, type WorkerEventName } from '../core/events';
import { ON_WORKHORSE_EVENT_METADATA, WORKHORSE_EVENT_NAMES } from './workhorse.constants';
import { WorkhorseConfigurationError } from './workhorse-configuration.error';
import { messages } from './workhorse.messages';

/**
 * Subscribes the method to one worker event (see `WorkerEventOf<name>` for its fields); repeat
 * the decorator for more events. Works on any singleton provider. The method is called with the
 * event as the worker emits it; what it throws (or a promise it returns rejects with) is logged
 * and never disturbs the worker. A slow synchronous subscriber slows the worker down: do heavy
 * work asynchronously.
 *
 * @example
 * @Injectable()
 * export class JobAlerts {
 *   @OnWorkhorseEvent('job.failed')
 *   async onFailed(event: WorkerEventOf<'job.failed'>): Promise<void> {
 *     await this.pager.notify(`${event.type} ${event.jobId} failed: ${event.error.message}`);
 *   }
 * }
 */
export function OnWorkhorseEvent(name: WorkerEventName): MethodDecorator {
  return (target, key, descriptor) => {
    const where = `${(target as { constructor: { name: string } }).constructor.name}.${String(key)}`;
    if (typeof descriptor.value !== 'function') throw new WorkhorseConfigurationError(messages.notAMethod('OnWorkhorseEvent', where));
    if (!isWorkerEventName(name)) throw new WorkhorseConfigurationError(messages.unknownEvent(where, name, WORKHORSE_EVENT_NAMES));
    const method = descriptor.value as object;
    const names = (Reflect.getOwnMetadata(ON_WORKHORSE_EVENT_METADATA, method) as WorkerEventName[] | undefined) ?? [];
    Reflect.defineMetadata(ON_WORKHORSE_EVENT_METADATA, [...names, name], method);
    return descriptor;
  };
}
