import { call } from './protocol/call';
import { REGISTER_HANDLERS } from './protocol/worker';
import type { Queryable, RetryPolicy } from './types';

/** A handler as the server needs to know it: its job type and its own retry policy, if any. */
export interface HandlerPolicy {
  type: string;
  retry: RetryPolicy | undefined;
}

/**
 * Tells the server the retry policy of each of a worker's handlers, for every queue the worker
 * claims from (`register_handlers_v1`). The server applies it to the attempts it closes itself
 * (an execution timeout or a lease that ran out: no worker reports those), as the worker does
 * for the failures it reports. A worker registers when it starts; the last registration of a
 * queue and type wins (docs/decisions.md).
 */
export async function registerHandlerPolicies(
  runner: Queryable,
  workerId: string,
  queues: readonly string[],
  handlers: Iterable<HandlerPolicy>,
): Promise<void> {
  const items = [...handlers].map((h) => ({ type: h.type, retryPolicy: h.retry ?? null }));
  if (items.length === 0) return;
  await call(runner, REGISTER_HANDLERS, [workerId, queues, JSON.stringify(items)]);
}
