import type { Pool } from 'pg';
import { applyConnectTimeout } from './connect-timeout';
import { call } from './protocol/call';
import { ENQUEUE_MANY, ENQUEUE_MANY_OUTCOMES, GET_OWN_JOB } from './protocol/producer';
import { UnknownDependencyError, WorkhorseValidationError } from './errors';
import { definedRequest, isJobDefinition, type DefinedEnqueueRequest, type EnqueueManyRequests, type JobDefinition } from './job-definition';
import { syncSchedules } from './schedules/sync';
import type { ScheduleDefinition, SyncedSchedule } from './schedules/types';
import { toSnapshot, type JobRow } from './protocol/job-row';
import type { DedupeOptions, EnqueueOptions, EnqueueOutcome, EnqueueRequest, EnqueueResult, JobSnapshot, Queryable } from './types';
import { JobMetrics } from './telemetry/job-metrics';
import { JobTracing } from './telemetry/job-tracing';
import { ResultWaiters, type WaitForResultOptions } from './result-waiters';
import { checkJobId, LIMITS, renamedRequestError, toRequestJson } from './validation';
import {
  completeHumanWait,
  sendSignal,
  type CompleteHumanWaitOptions,
  type CompleteHumanWaitStatus,
  type SendSignalOptions,
  type SendSignalStatus,
} from './waits';

/**
 * Puts jobs into PostgreSQL. Pass your open transaction's client as the last argument and the
 * job commits or rolls back with your own writes; without it the pool runs the insert on its own.
 *
 * @example
 * const queue = new Queue(pool);
 * const client = await pool.connect();
 * await client.query('BEGIN');
 * await client.query('INSERT INTO orders (id) VALUES ($1)', [orderId]);
 * await queue.enqueue('order.fulfill', { orderId }, {}, client);
 * await client.query('COMMIT');
 */
export class Queue {
  private metrics: JobMetrics | null | undefined;
  private tracing: JobTracing | null | undefined;
  private waiters: ResultWaiters | undefined;

  constructor(readonly pool: Pool) {
    applyConnectTimeout(pool);
  }

  /**
   * Enqueues one job and returns its id. A bad argument raises {@link WorkhorseValidationError}
   * naming the field, and nothing is written: what JSON cannot carry is refused before anything is
   * sent, every range and rule by `enqueue_many_v1` before it writes.
   * Given a definition (`defineJob`), the payload must be of its type, its validator (if any)
   * runs first (a refusal is a `JobDataRejectedError`), and its defaults apply under `options`.
   */
  enqueue<P = unknown>(type: string, payload: P, options?: EnqueueOptions, client?: Queryable): Promise<string>;
  enqueue<P, R, I>(definition: JobDefinition<P, R, I>, payload: NoInfer<I>, options?: EnqueueOptions, client?: Queryable): Promise<string>;
  async enqueue(job: string | JobDefinition<unknown, unknown, unknown>, payload: unknown, options?: EnqueueOptions, client?: Queryable): Promise<string> {
    return (await this.enqueueOne(job, payload, options, client, ENQUEUE_MANY)).job_id;
  }

  /**
   * Enqueues one job with a deduplication window (`options.dedupe`, see {@link DedupeOptions}
   * and docs/deduplication.md) and answers the job and what happened: `created` (a new job),
   * `throttled` (the window's first job, nothing written) or `debounced` (the waiting job now
   * has this payload and/or runs `windowMs` from now). Enforced in PostgreSQL across every
   * process; in the caller's transaction like {@link enqueue} (a rollback undoes it, and other
   * enqueues of the key wait for that transaction to end). Arguments as for {@link enqueue}.
   *
   * @example
   * const { jobId, outcome } = await queue.enqueueDeduped('search.reindex', { userId: '42' }, {
   *   dedupe: { key: 'user-42', windowMs: 5000, mode: 'debounce' },
   * });
   */
  enqueueDeduped<P = unknown>(type: string, payload: P, options: DedupedEnqueueOptions, client?: Queryable): Promise<EnqueueResult>;
  enqueueDeduped<P, R, I>(definition: JobDefinition<P, R, I>, payload: NoInfer<I>, options: DedupedEnqueueOptions, client?: Queryable): Promise<EnqueueResult>;
  async enqueueDeduped(
    job: string | JobDefinition<unknown, unknown, unknown>,
    payload: unknown,
    options: DedupedEnqueueOptions,
    client?: Queryable,
  ): Promise<EnqueueResult> {
    const row = await this.enqueueOne(job, payload, options, client, ENQUEUE_MANY_OUTCOMES);
    return { jobId: row.job_id, outcome: row.outcome as EnqueueOutcome };
  }

  /** One enqueue through `statement` (ENQUEUE_MANY, or ENQUEUE_MANY_OUTCOMES with an outcome). */
  private async enqueueOne(
    job: string | JobDefinition<unknown, unknown, unknown>,
    payload: unknown,
    options: EnqueueOptions | undefined,
    client: Queryable | undefined,
    statement: string,
  ): Promise<{ job_id: string; outcome?: string }> {
    let request: string;
    let queue: string | undefined;
    const type = isJobDefinition(job) ? job.type : job;
    if (isJobDefinition(job)) {
      const defined = await definedRequest(job, payload, options);
      request = toRequestJson(job.type, defined.payload, defined.options);
      queue = defined.options?.queue;
    } else {
      request = toRequestJson(job, payload, options);
      queue = options?.queue;
    }
    const tracing = this.jobTracing();
    // (Tested first, so without an SDK an enqueue builds nothing for tracing.)
    const span = tracing === null ? null : tracing.startEnqueue([{ type, queue }]);
    try {
      const [row] = await this.call<{ job_id: string; outcome?: string }>(statement, [`[${span ? span.carry(request) : request}]`], client);
      span?.sent([row.job_id]);
      // Only a job written counts (an exact idempotent repeat did before outcomes were known).
      if (row.outcome === undefined || row.outcome === 'created') this.jobMetrics()?.enqueued(queue ?? 'default', type);
      return row;
    } catch (error) {
      span?.failed(error);
      // Named as the caller gave it: `dependsOn[0]`, not the batch's `requests[0].dependsOn[0]`.
      if (error instanceof UnknownDependencyError) throw new UnknownDependencyError(error.field.replace(/^requests\[0\]\./, ''), error.message, error.jobId);
      throw renamedRequestError(error, () => '');
    }
  }

  /**
   * Enqueues up to 1000 jobs in one statement, all or nothing, and returns their ids in input
   * order. A request names its job by `type`, or by definition (`{ job: definition, payload,
   * ...options }`): then, as for `enqueue(definition)`, its payload must be of the definition's
   * type, its validator runs (a refusal is a `JobDataRejectedError` naming `requests[i].payload`)
   * and its defaults apply under the request's options. Nothing is written unless every request
   * passes (the SQL function checks them all first). The whole batch may hold at most 16 MiB of JSON (`LIMITS.batchBytes`, payloads and
   * options together): a larger one is refused before it is sent, as soon as the requests read so
   * far pass the limit, so the memory it takes stays bounded.
   *
   * @example
   * await queue.enqueueMany([
   *   { job: fulfillOrder, payload: { orderId: '42' } },
   *   { type: 'audit.log', payload: { event: 'order.placed' }, dependsOn: [0] },
   * ]);
   */
  async enqueueMany<const T extends readonly (EnqueueRequest | DefinedEnqueueRequest)[]>(requests: EnqueueManyRequests<T>, client?: Queryable): Promise<string[]> {
    if (!Array.isArray(requests)) throw new WorkhorseValidationError('requests', 'must be an array');
    if (requests.length === 0) return [];
    const texts: string[] = [];
    const jobs: { type: string; queue: string | undefined }[] = [];
    // The brackets and the commas between requests.
    let bytes = 1 + requests.length;
    for (const [i, request] of (requests as readonly unknown[]).entries()) {
      const given = batchRequest(request, i);
      // Awaited only for a request by definition, so a batch by type costs no promise per request.
      const { type, payload, options } = given instanceof Promise ? await given : given;
      const text = toRequestJson(type, payload, options, `requests[${i}].`);
      bytes += Buffer.byteLength(text, 'utf8');
      if (bytes > LIMITS.batchBytes) {
        throw new WorkhorseValidationError(
          'requests',
          `a batch holds at most 16 MiB of JSON (${LIMITS.batchBytes} bytes); requests[0] to requests[${i}] already hold ${bytes}`,
        );
      }
      texts.push(text);
      jobs.push({ type: type as string, queue: options.queue });
    }
    const span = this.jobTracing()?.startEnqueue(jobs) ?? null;
    let ids: string[];
    try {
      ids = await this.send(`[${(span ? texts.map((text) => span.carry(text)) : texts).join(',')}]`, client);
    } catch (error) {
      span?.failed(error);
      throw error;
    }
    span?.sent(ids);
    const metrics = this.jobMetrics();
    if (metrics) for (const job of jobs) metrics.enqueued(job.queue ?? 'default', job.type);
    return ids;
  }

  /**
   * A job this producer enqueued, or null: a job's snapshot is given only to the login role that
   * enqueued it (the `producer` capability; `Admin.getJob` reads any job). An unknown id and
   * another role's job both answer null, so a producer learns nothing about other jobs.
   *
   * @example
   * const id = await queue.enqueue('report.build', { month: '2030-01' });
   * const job = await queue.getJob(id);
   * console.log(job?.state);
   */
  async getJob(jobId: string, client?: Queryable): Promise<JobSnapshot | null> {
    checkJobId(jobId);
    const rows = await this.call<JobRow>(GET_OWN_JOB, [jobId], client);
    return rows.length === 0 ? null : toSnapshot(rows[0]);
  }

  /**
   * Waits until the job ends, whichever process or language runs it, and answers its result. A
   * job that ended `failed` rejects with `JobFailedError` (its stored error envelope in
   * `jobError`), one that ended `canceled` with `JobResultCanceledError`; an id this producer
   * cannot read (the rule of {@link getJob}) with `JobNotFoundError`. After `timeoutMs` the wait
   * rejects with `WaitForResultTimeoutError`, on `signal` with the signal's reason; the job goes on
   * either way. A job that has ended answers at once. All waits of this queue share one LISTEN
   * connection (open while something is awaited) and batched reads; every 5 s
   * (`results.pollMs` of limits.json) they read again, so a lost notification only delays one.
   *
   * @example
   * const id = await queue.enqueue('invoice.render', { invoiceId: 'inv-1' });
   * const { url } = await queue.waitForResult<{ url: string }>(id, { timeoutMs: 30_000 });
   */
  async waitForResult<R = unknown>(jobId: string, options?: WaitForResultOptions): Promise<R> {
    this.waiters ??= new ResultWaiters(this.pool);
    return this.waiters.wait(jobId, options) as Promise<R>;
  }

  /**
   * Makes `definitions` the desired state of the schedules of `namespace`, in one transaction
   * under a lock per namespace: new keys are created, changed ones updated, keys no longer listed
   * disabled (never deleted; listing them again enables them). Every change bumps the schedule's
   * revision and is recorded in its history. Every definition is checked first (a bad cron
   * expression is an `InvalidCronError`, an unknown zone an `UnknownTimeZoneError`, naming the
   * schedule) and nothing is written unless all pass. Then the next occurrences are planned;
   * workers' maintenance ticks fire them, each exactly once. See docs/schedules.md.
   *
   * @example
   * await queue.syncSchedules('billing', [
   *   { key: 'invoices.monthly', type: 'invoice.run', cron: '0 3 1 * *', timezone: 'Europe/Berlin' },
   * ]);
   */
  async syncSchedules(namespace: string, definitions: readonly ScheduleDefinition[], client?: Queryable): Promise<SyncedSchedule[]> {
    return syncSchedules(this.runner(client), namespace, definitions);
  }

  /**
   * Sends the signal `name` (with an optional JSON `payload`, at most 1 MiB) to a job that waits
   * for it with `ctx.waitForSignal`, in the caller's transaction like {@link enqueue}. Answers
   * `delivered` (the job was waiting: it becomes ready), `buffered` (the job is live but not
   * waiting yet: its next wait for `name` takes the signal), `duplicate` (sent before with the
   * same `idempotencyKey`), `not_found` or `finished` (nothing written in the last three).
   *
   * @example
   * await queue.sendSignal(jobId, 'shipped', { trackingId: 'T-1' }, { idempotencyKey: 'shipment-T-1' });
   */
  async sendSignal(jobId: string, name: string, payload?: unknown, options?: SendSignalOptions, client?: Queryable): Promise<SendSignalStatus> {
    return sendSignal(this.runner(client), jobId, name, payload, options);
  }

  /**
   * Records the decision for a job's open human wait `name` (see `ctx.waitForHuman`) and wakes
   * the job, in the caller's transaction. A decision outside the wait's `choices` raises
   * `DecisionNotAllowedError` and writes nothing. Answers `completed`, `duplicate` (decided
   * before with the same `idempotencyKey`), `already_decided` (decided otherwise), `timed_out`
   * (the wait's timeout passed, by the database's clock, even if the job has not woken to see it
   * yet: nothing recorded), `not_waiting` (the job is live but has not reached that wait), `not_found` or `finished`.
   *
   * @example
   * await queue.completeHumanWait(jobId, 'approve-refund', 'approve', { actor: 'alice', reason: 'loyal customer' });
   */
  async completeHumanWait(
    jobId: string,
    name: string,
    decision: unknown,
    options: CompleteHumanWaitOptions,
    client?: Queryable,
  ): Promise<CompleteHumanWaitStatus> {
    return completeHumanWait(this.runner(client), jobId, name, decision, options);
  }

  /**
   * Where an enqueue runs when the caller passes no client: the pool. Integrations override it
   * (the Nest `Queue` answers with the current transaction).
   */
  protected runner(client?: Queryable): Queryable {
    return client ?? this.pool;
  }

  /** The job metrics (null without an OpenTelemetry SDK), resolved at the first enqueue. */
  private jobMetrics(): JobMetrics | null {
    if (this.metrics === undefined) this.metrics = JobMetrics.active();
    return this.metrics;
  }

  /**
   * The job tracing (null without an OpenTelemetry SDK), resolved at the first enqueue; it
   * records a PRODUCER span when the caller has an active span.
   */
  private jobTracing(): JobTracing | null {
    if (this.tracing === undefined) this.tracing = JobTracing.active();
    return this.tracing;
  }

  private async send(requests: string, client?: Queryable): Promise<string[]> {
    const rows = await this.call<{ job_id: string }>(ENQUEUE_MANY, [requests], client);
    return rows.map((row) => row.job_id);
  }

  private call<R>(statement: string, values: unknown[], client?: Queryable): Promise<R[]> {
    return call<R>(this.runner(client), statement, values, this.pool);
  }
}

/** The options of `Queue.enqueueDeduped`: those of an enqueue, with a deduplication window. */
export type DedupedEnqueueOptions = EnqueueOptions & { dedupe: DedupeOptions };

/** One request of a batch as `toRequestJson` takes it. */
interface BatchRequest {
  type: unknown;
  payload: unknown;
  options: { queue?: string };
}

/**
 * One request of a batch as `toRequestJson` takes it; a request by definition (a promise: its
 * validator may be async) has its payload validated and the definition's defaults under its
 * options. Anything else goes on as given, so the usual validation names what is wrong.
 */
function batchRequest(request: unknown, i: number): BatchRequest | Promise<BatchRequest> {
  if (typeof request !== 'object' || request === null) {
    throw new WorkhorseValidationError(`requests[${i}]`, 'must be an object with type and payload, or job (a definition) and payload');
  }
  const { type, payload, ...options } = request as Record<string, unknown>;
  if (!('job' in options)) return { type, payload, options };
  const { job, ...rest } = options;
  if (!isJobDefinition(job)) throw new WorkhorseValidationError(`requests[${i}].job`, 'must be a job definition (made by defineJob)');
  if (type !== undefined) throw new WorkhorseValidationError(`requests[${i}].type`, 'give type or job (whose type it is), not both');
  return definedRequest(job, payload, rest, `requests[${i}].`).then((defined) => ({ type: job.type, payload: defined.payload, options: defined.options ?? {} }));
}
