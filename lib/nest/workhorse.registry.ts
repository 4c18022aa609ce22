import type { ScheduleDefinition } from '../core/schedules/types';
import type { RetryPolicy } from '../core/types';
import type { WorkerEvent, WorkerEventName } from '../core/events';
import type { JobDefinition } from '../core/job-definition';
import type { JobHandlerFn } from '../core/worker';
import { WorkhorseConfigurationError } from './workhorse-configuration.error';
import { messages } from './workhorse.messages';

/** A discovered `@JobHandler`, ready to register with a core Worker. */
export interface DiscoveredHandler {
  type: string;
  /** The queue the handler declared, if any. */
  queue: string | undefined;
  transactional: boolean;
  retry: RetryPolicy | undefined;
  /** `Class.method`, for messages. */
  target: string;
  fn: JobHandlerFn;
  /** The definition the handler was declared with, if any. */
  definition: JobDefinition<unknown, unknown, unknown> | undefined;
  /** The schedules declared on it (`@JobHandler(type, { schedule })`). */
  schedules: ScheduleDefinition[];
}

/** A discovered `@OnWorkhorseEvent` method. */
export interface DiscoveredSubscriber {
  event: WorkerEventName;
  target: string;
  invoke(event: WorkerEvent): unknown;
}

/**
 * What discovery found, shared by the worker service (which registers the handlers), the Nest
 * `Queue` (which routes a type to its handler's queue) and the event dispatch.
 */
export class WorkhorseRegistry {
  private readonly byType = new Map<string, DiscoveredHandler>();
  private readonly byEvent = new Map<WorkerEventName, DiscoveredSubscriber[]>();

  addHandler(handler: DiscoveredHandler): void {
    const existing = this.byType.get(handler.type);
    if (existing) throw new WorkhorseConfigurationError(messages.duplicateHandler(handler.type, existing.target, handler.target));
    this.byType.set(handler.type, handler);
  }

  addSubscriber(subscriber: DiscoveredSubscriber): void {
    const list = this.byEvent.get(subscriber.event) ?? [];
    list.push(subscriber);
    this.byEvent.set(subscriber.event, list);
  }

  get handlers(): readonly DiscoveredHandler[] {
    return [...this.byType.values()];
  }

  /** Every schedule declared on a handler, with the handler that declared it. */
  get schedules(): readonly { definition: ScheduleDefinition; target: string }[] {
    return this.handlers.flatMap((handler) => handler.schedules.map((definition) => ({ definition, target: handler.target })));
  }

  /** The queue the handler of `type` declared, or undefined. */
  queueOf(type: string): string | undefined {
    return this.byType.get(type)?.queue;
  }

  /** The definition the handler of `type` was declared with (`@JobHandler(definition)`), or undefined. */
  definitionOf(type: string): JobDefinition<unknown, unknown, unknown> | undefined {
    return this.byType.get(type)?.definition;
  }

  subscribersOf(event: WorkerEventName): readonly DiscoveredSubscriber[] {
    return this.byEvent.get(event) ?? [];
  }

  /** The events some `@OnWorkhorseEvent` method subscribes to. */
  get subscribedEvents(): WorkerEventName[] {
    return [...this.byEvent.keys()];
  }
}
