import { InvalidCronError, UnknownTimeZoneError, WorkhorseValidationError } from '../core/errors';
import { toWireSchedule } from '../core/schedules/definition';
import type { ScheduleDefinition } from '../core/schedules/types';
import type { HandlerContext } from '../core/context';
import { isJobDefinition, type JobDefinition } from '../core/job-definition';
import type { RetryPolicy } from '../core/types';
import { checkName } from '../core/validation';
import { checkHandlerOptions, type HandlerSettings } from '../core/worker';
import { JOB_HANDLER_METADATA } from './workhorse.constants';
import { WorkhorseConfigurationError } from './workhorse-configuration.error';
import type { JobHandlerOptions, JobHandlerSchedule } from './workhorse-module-options.interface';
import { messages } from './workhorse.messages';

/** One `@JobHandler` registration, as stored on the method. */
export interface JobHandlerMetadata {
  type: string;
  queue: string | undefined;
  transactional: boolean;
  retry: RetryPolicy | undefined;
  /** The definition it was declared with, if any (the worker then checks results with it). */
  definition: JobDefinition<unknown, unknown, unknown> | undefined;
  /** Its schedules, complete (type, key, and the handler's queue unless the schedule names one). */
  schedules: ScheduleDefinition[];
}

/** What `@JobHandler(definition)` decorates: a method that takes the definition's payload and returns its result. */
export type TypedJobHandlerDecorator<P, R> = <M extends (payload: P, ctx: HandlerContext) => R | Promise<R>>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<M>,
) => TypedPropertyDescriptor<M> | void;

function isPlainOptions(value: unknown): value is JobHandlerOptions {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checked(value: unknown, label: string, report: (detail: string) => string): string {
  try {
    return checkName(value, label);
  } catch (error) {
    if (error instanceof WorkhorseValidationError) throw new WorkhorseConfigurationError(report(error.message.slice(label.length + 2)));
    throw error;
  }
}

/**
 * Makes the method the handler of one job type. WorkhorseModule finds it at start-up on any
 * singleton provider (class, `useFactory` or `useValue`) and registers it with the worker; it is
 * called with `this` bound to the provider and receives `(payload, ctx)` (ctx: `HandlerContext`).
 * What it returns is the job's result. A method may handle several types (one decorator each);
 * a type has exactly one handler in an application.
 *
 * Options: `queue` (the queue of this job type: the worker claims from it and `Queue.enqueue`
 * puts the type there by default), `transactional` (run inside the transaction that records
 * the job's completion) and `retry` (the retry policy of jobs enqueued without one).
 *
 * Given a definition (`defineJob`) instead of a type, the method must take its payload type and
 * return its result type (else it does not compile), the queue is the definition's, and the
 * definition's result validator checks each result before it is recorded.
 *
 * @example
 * @Injectable()
 * export class EmailHandlers {
 *   constructor(private readonly mailer: Mailer) {}
 *
 *   @JobHandler('email.send', { queue: 'emails' })
 *   async send(payload: { to: string }, ctx: HandlerContext): Promise<{ messageId: string }> {
 *     return ctx.checkpoint('send', () => this.mailer.send(payload.to, { idempotencyKey: ctx.jobId }));
 *   }
 *
 *   @JobHandler(sendReceipt) // const sendReceipt = defineJob<{ orderId: string }, { messageId: string }>('receipt.send')
 *   async receipt(payload: { orderId: string }): Promise<{ messageId: string }> { ... }
 * }
 */
export function JobHandler(type: string, options?: JobHandlerOptions): MethodDecorator;
export function JobHandler<P, R, I>(definition: JobDefinition<P, R, I>, options?: Omit<JobHandlerOptions, 'queue'>): TypedJobHandlerDecorator<P, R>;
export function JobHandler(job: string | JobDefinition<unknown, unknown, unknown>, options: JobHandlerOptions = {}): MethodDecorator {
  const definition = isJobDefinition(job) ? job : undefined;
  const type = definition ? definition.type : job;
  return (target, key, descriptor) => {
    const name = `${(target as { constructor: { name: string } }).constructor.name}.${String(key)}`;
    if (typeof descriptor.value !== 'function') throw new WorkhorseConfigurationError(messages.notAMethod('JobHandler', name));
    const checkedType = checked(type, 'type', (detail) => messages.badHandlerType(name, type, detail));
    if (definition && isPlainOptions(options) && options.queue !== undefined) {
      throw new WorkhorseConfigurationError(messages.queueWithDefinition(name, definition.type));
    }
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new WorkhorseConfigurationError(messages.badHandlerOptions(name, options));
    }
    // The core's rules for handler options; `queue` and `schedule` are this decorator's own.
    let settings: HandlerSettings;
    try {
      settings = checkHandlerOptions(options, ['queue', 'schedule']);
    } catch (error) {
      if (error instanceof WorkhorseValidationError) throw new WorkhorseConfigurationError(messages.badHandlerOption(name, error.message));
      throw error;
    }
    const queue =
      options.queue === undefined
        ? definition?.defaults.queue
        : checked(options.queue, 'queue', (detail) => messages.badHandlerQueue(name, options.queue, detail));
    const schedules = handlerSchedules(name, checkedType, queue, options.schedule);
    const method = descriptor.value as object;
    const existing = (Reflect.getOwnMetadata(JOB_HANDLER_METADATA, method) as JobHandlerMetadata[] | undefined) ?? [];
    const entry: JobHandlerMetadata = {
      type: checkedType,
      queue,
      transactional: settings.transactional,
      retry: settings.retry,
      definition,
      schedules,
    };
    Reflect.defineMetadata(JOB_HANDLER_METADATA, [...existing, entry], method);
    return descriptor;
  };
}

/**
 * The complete definitions of a handler's `schedule` option, checked now: an invalid cron
 * expression or zone is the core's typed error (naming the schedule), anything else a
 * configuration error naming the handler.
 */
function handlerSchedules(
  target: string,
  type: string,
  queue: string | undefined,
  schedule: JobHandlerSchedule | JobHandlerSchedule[] | undefined,
): ScheduleDefinition[] {
  if (schedule === undefined) return [];
  const list = Array.isArray(schedule) ? schedule : [schedule];
  const keys = new Set<string>();
  return list.map((entry, i) => {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw new WorkhorseConfigurationError(messages.badHandlerSchedule(target, i, 'must be an object such as { cron: "0 6 * * *" }'));
    }
    if ((entry as { type?: unknown }).type !== undefined) {
      throw new WorkhorseConfigurationError(messages.badHandlerSchedule(target, i, 'names no type: the job type is the handler\'s'));
    }
    const definition: ScheduleDefinition = {
      ...entry,
      key: entry.key ?? type,
      type,
      ...(queue !== undefined && entry.options?.queue === undefined && { options: { ...entry.options, queue } }),
    };
    try {
      toWireSchedule(definition);
    } catch (error) {
      if (error instanceof InvalidCronError || error instanceof UnknownTimeZoneError) throw error;
      if (error instanceof WorkhorseValidationError) throw new WorkhorseConfigurationError(messages.badHandlerSchedule(target, i, error.message));
      throw error;
    }
    if (keys.has(definition.key)) throw new WorkhorseConfigurationError(messages.duplicateHandlerScheduleKey(target, definition.key));
    keys.add(definition.key);
    return definition;
  });
}
