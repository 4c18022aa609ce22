import type { Pool } from 'pg';
import { isJobDefinition, type DefinedEnqueueRequest, type EnqueueManyRequests, type JobDefinition } from '../core/job-definition';
import { Queue, type DedupedEnqueueOptions } from '../core/queue';
import type { EnqueueOptions, EnqueueRequest, EnqueueResult, Queryable } from '../core/types';
import type { EnqueueOutsideTransactionCheck } from './enqueue-outside-transaction.check';
import type { WorkhorseRegistry } from './workhorse.registry';
import type { WorkhorseTransactionHost } from './workhorse-transaction.host';

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The `Queue` that Nest injects: with no client argument it enqueues in the current transaction
 * of the host (the pool outside one; see `runner`), and with no `queue` option it puts a job type into the
 * queue its `@JobHandler` declares. A type whose `@JobHandler` was declared with a definition is
 * enqueued as that definition, by its type too (its validator runs, its defaults apply), in
 * `enqueue` and `enqueueMany` alike. With `requireTransaction` (or in development, see
 * {@link EnqueueOutsideTransactionCheck}) an enqueue outside any transaction is refused (or
 * warned about). Anything it is not sure about goes to the core unchanged, so the core's
 * validation reports it.
 */
export class WorkhorseQueue extends Queue {
  constructor(
    pool: Pool,
    private readonly host: WorkhorseTransactionHost,
    private readonly registry: WorkhorseRegistry,
    private readonly outside: EnqueueOutsideTransactionCheck | null = null,
  ) {
    super(pool);
  }

  override enqueue<P = unknown>(type: string, payload: P, options?: EnqueueOptions, client?: Queryable): Promise<string>;
  override enqueue<P, R, I>(definition: JobDefinition<P, R, I>, payload: NoInfer<I>, options?: EnqueueOptions, client?: Queryable): Promise<string>;
  override enqueue(job: string | JobDefinition<unknown, unknown, unknown>, payload: unknown, options?: EnqueueOptions, client?: Queryable): Promise<string> {
    // The transaction of the call's start, even if a validator answers after it ended (a missing await): then the insert fails.
    const target = client ?? this.host.client;
    const refused = this.outside?.check('enqueue', () => typeName(job), target, WorkhorseQueue.prototype.enqueue);
    if (refused) return Promise.reject(refused);
    const definition = isJobDefinition(job) ? job : typeof job === 'string' ? this.registry.definitionOf(job) : undefined;
    if (definition) {
      // The definition's queue counts as given: only a type without one is routed to its handler's queue.
      const routed = options === undefined || isPlainObject(options) ? this.route(definition.type, { ...definition.defaults, ...options }) : options;
      return super.enqueue(definition, payload, routed, target);
    }
    return super.enqueue(job as string, payload, this.route(job, options), target);
  }

  override enqueueDeduped<P = unknown>(type: string, payload: P, options: DedupedEnqueueOptions, client?: Queryable): Promise<EnqueueResult>;
  override enqueueDeduped<P, R, I>(definition: JobDefinition<P, R, I>, payload: NoInfer<I>, options: DedupedEnqueueOptions, client?: Queryable): Promise<EnqueueResult>;
  override enqueueDeduped(
    job: string | JobDefinition<unknown, unknown, unknown>,
    payload: unknown,
    options: DedupedEnqueueOptions,
    client?: Queryable,
  ): Promise<EnqueueResult> {
    // As enqueue: the current transaction, the handler's queue, the definition of the type.
    const target = client ?? this.host.client;
    const refused = this.outside?.check('enqueueDeduped', () => typeName(job), target, WorkhorseQueue.prototype.enqueueDeduped);
    if (refused) return Promise.reject(refused);
    const definition = isJobDefinition(job) ? job : typeof job === 'string' ? this.registry.definitionOf(job) : undefined;
    if (definition) {
      const routed = isPlainObject(options) ? this.route(definition.type, { ...definition.defaults, ...options }) : options;
      return super.enqueueDeduped(definition, payload, routed as DedupedEnqueueOptions, target);
    }
    return super.enqueueDeduped(job as string, payload, this.route(job, options) as DedupedEnqueueOptions, target);
  }

  override enqueueMany<const T extends readonly (EnqueueRequest | DefinedEnqueueRequest)[]>(requests: EnqueueManyRequests<T>, client?: Queryable): Promise<string[]> {
    const target = client ?? this.host.client;
    const refused = this.outside?.check('enqueueMany', () => batchTypes(requests), target, WorkhorseQueue.prototype.enqueueMany);
    if (refused) return Promise.reject(refused);
    const routed = Array.isArray(requests) ? (requests as readonly unknown[]).map((request) => this.routeRequest(request)) : requests;
    return super.enqueueMany(routed as EnqueueManyRequests<T>, target);
  }

  protected override runner(client?: Queryable): Queryable {
    return client ?? this.host.client ?? this.pool;
  }

  /** A batch's request by type whose handler has a definition becomes one by that definition; each gets its handler's queue. */
  private routeRequest(request: unknown): unknown {
    if (!isPlainObject(request)) return request;
    let routed = request;
    const definition = request.job === undefined && typeof request.type === 'string' ? this.registry.definitionOf(request.type) : undefined;
    if (definition) {
      routed = { ...request, job: definition };
      delete routed.type;
    }
    const job = routed.job;
    if (job === undefined) return this.route(routed.type, routed);
    if (!isJobDefinition(job)) return routed;
    // The definition's queue counts as given, as in enqueue.
    return job.defaults.queue === undefined ? this.route(job.type, routed) : routed;
  }

  private route<O extends Pick<EnqueueOptions, 'queue'>>(type: unknown, options: O | undefined): O | undefined {
    if (options !== undefined && (!isPlainObject(options) || options.queue !== undefined)) return options;
    const queue = typeof type === 'string' ? this.registry.queueOf(type) : undefined;
    return queue === undefined ? options : ({ ...options, queue } as O);
  }
}

function typeName(job: unknown): string {
  const type = isJobDefinition(job) ? job.type : job;
  return typeof type === 'string' ? JSON.stringify(type) : 'a job';
}

/** The types of a batch, for messages: `["a", "b"]` (the first three, then how many more). */
function batchTypes(requests: unknown): string {
  if (!Array.isArray(requests)) return '';
  const types = [...new Set(requests.map((request: unknown) => typeName(isPlainObject(request) ? (request.job ?? request.type) : undefined)))];
  return types.length <= 3 ? `[${types.join(', ')}]` : `[${types.slice(0, 3).join(', ')}, ... ${types.length - 3} more]`;
}
