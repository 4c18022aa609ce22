import { WORKER_EVENT_NAMES } from '../core/events';

/** Metadata key of `@JobHandler` (an array of registrations on the method). */
export const JOB_HANDLER_METADATA = 'workhorse:job-handler';

/** Metadata key of `@OnWorkhorseEvent` (an array of event names on the method). */
export const ON_WORKHORSE_EVENT_METADATA = 'workhorse:on-event';

/** Metadata key that marks a method wrapped by `@Transactional()`. */
export const TRANSACTIONAL_METADATA = 'workhorse:transactional';

/**
 * The hidden property through which a `@Transactional()` method finds its transaction host at
 * call time. The explorer sets it on every singleton provider and controller that has such
 * methods; a symbol, so it never collides with the class's own members.
 */
export const TRANSACTION_HOST = Symbol('workhorse.transactionHost');

/**
 * Every worker event name, in lifecycle order (the core's list).
 *
 * @example
 * for (const name of WORKHORSE_EVENT_NAMES) counters.set(name, 0);
 */
export const WORKHORSE_EVENT_NAMES = WORKER_EVENT_NAMES;
