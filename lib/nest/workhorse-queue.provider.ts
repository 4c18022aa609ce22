import type { Pool } from 'pg';
import { isJobDefinition, type JobDefinition } from '../core/job-definition';
import { Queue } from '../core/queue';
import type { EnqueueOptions, EnqueueRequest, Queryable } from '../core/types';
import type { WorkhorseRegistry } from './workhorse.registry';
import type { WorkhorseTransactionHost } from './workhorse-transaction.host';

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The `Queue` that Nest injects: with no client argument it enqueues in the current transaction
 * of the host (the pool outside one; see `runner`), and with no `queue` option it puts a job type into the
 * queue its `@JobHandler` declares. Anything it is not sure about goes to the core unchanged,
 * so the core's validation reports it.
 */
export class WorkhorseQueue extends Queue {
  constructor(
    pool: Pool,
    private readonly host: WorkhorseTransactionHost,
    private readonly registry: WorkhorseRegistry,
  ) {
    super(pool);
  }

  override enqueue<P = unknown>(type: string, payload: P, options?: EnqueueOptions, client?: Queryable): Promise<string>;
  override enqueue<P, R, I>(definition: JobDefinition<P, R, I>, payload: NoInfer<I>, options?: EnqueueOptions, client?: Queryable): Promise<string>;
  override enqueue(job: string | JobDefinition<unknown, unknown, unknown>, payload: unknown, options?: EnqueueOptions, client?: Queryable): Promise<string> {
    if (isJobDefinition(job)) {
      // The definition's queue counts as given: only a type without one is routed to its handler's queue.
      const routed = options === undefined || isPlainObject(options) ? this.route(job.type, { ...job.defaults, ...options }) : options;
      return super.enqueue(job, payload, routed, client);
    }
    return super.enqueue(job, payload, this.route(job, options), client);
  }

  override enqueueMany(requests: EnqueueRequest[], client?: Queryable): Promise<string[]> {
    const routed = Array.isArray(requests)
      ? requests.map((request) => (isPlainObject(request) ? (this.route(request.type, request) ?? request) : request))
      : requests;
    return super.enqueueMany(routed, client);
  }

  protected override runner(client?: Queryable): Queryable {
    return client ?? this.host.client ?? this.pool;
  }

  private route<O extends Pick<EnqueueOptions, 'queue'>>(type: unknown, options: O | undefined): O | undefined {
    if (options !== undefined && (!isPlainObject(options) || options.queue !== undefined)) return options;
    const queue = typeof type === 'string' ? this.registry.queueOf(type) : undefined;
    return queue === undefined ? options : ({ ...options, queue } as O);
  }
}
