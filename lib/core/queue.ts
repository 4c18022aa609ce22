import type { Pool } from 'pg';
import { applyConnectTimeout } from './connect-timeout';
import { fromDatabaseError } from './database-errors';
import { WorkhorseValidationError } from './errors';
import { definedRequest, isJobDefinition, type JobDefinition } from './job-definition';
import { toSnapshot, type JobRow } from './job-snapshot';
import type { EnqueueOptions, EnqueueRequest, JobSnapshot, Queryable } from './types';
import { checkJobId, LIMITS, toRequestJson } from './validation';
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
  constructor(readonly pool: Pool) {
    applyConnectTimeout(pool);
  }

  /**
   * Enqueues one job and returns its id. Input is validated before anything is sent: a bad
   * argument raises {@link WorkhorseValidationError} naming the field, and nothing is written.
   * Given a definition (`defineJob`), the payload must be of its type, its validator (if any)
   * runs first (a refusal is a `JobDataRejectedError`), and its defaults apply under `options`.
   */
  enqueue<P = unknown>(type: string, payload: P, options?: EnqueueOptions, client?: Queryable): Promise<string>;
  enqueue<P, R, I>(definition: JobDefinition<P, R, I>, payload: NoInfer<I>, options?: EnqueueOptions, client?: Queryable): Promise<string>;
  async enqueue(job: string | JobDefinition<unknown, unknown, unknown>, payload: unknown, options?: EnqueueOptions, client?: Queryable): Promise<string> {
    let request: string;
    if (isJobDefinition(job)) {
      const defined = await definedRequest(job, payload, options);
      request = toRequestJson(job.type, defined.payload, defined.options);
    } else {
      request = toRequestJson(job, payload, options);
    }
    const [id] = await this.send(`[${request}]`, client);
    return id;
  }

  /**
   * Enqueues up to 1000 jobs in one statement, all or nothing, and returns their ids in input
   * order. The whole batch may hold at most 16 MiB of JSON (`LIMITS.batchBytes`, payloads and
   * options together): a larger one is refused before it is sent, as soon as the requests read so
   * far pass the limit, so the memory it takes stays bounded.
   */
  async enqueueMany(requests: EnqueueRequest[], client?: Queryable): Promise<string[]> {
    if (!Array.isArray(requests)) throw new WorkhorseValidationError('requests', 'must be an array');
    if (requests.length > LIMITS.batchSize) {
      throw new WorkhorseValidationError('requests', `a batch holds at most ${LIMITS.batchSize} jobs, got ${requests.length}`);
    }
    if (requests.length === 0) return [];
    const texts: string[] = [];
    // The brackets and the commas between requests.
    let bytes = 1 + requests.length;
    for (const [i, request] of requests.entries()) {
      if (typeof request !== 'object' || request === null) {
        throw new WorkhorseValidationError(`requests[${i}]`, 'must be an object with type and payload');
      }
      const { type, payload, ...options } = request;
      const text = toRequestJson(type, payload, options, `requests[${i}].`);
      bytes += Buffer.byteLength(text, 'utf8');
      if (bytes > LIMITS.batchBytes) {
        throw new WorkhorseValidationError(
          'requests',
          `a batch holds at most 16 MiB of JSON (${LIMITS.batchBytes} bytes); requests[0] to requests[${i}] already hold ${bytes}`,
        );
      }
      texts.push(text);
    }
    return this.send(`[${texts.join(',')}]`, client);
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
    const rows = await this.call<JobRow>('SELECT * FROM workhorse.get_own_job_v1($1)', [jobId], client);
    return rows.length === 0 ? null : toSnapshot(rows[0]);
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
   * before with the same `idempotencyKey`), `already_decided` (decided otherwise or timed out),
   * `not_waiting` (the job is live but has not reached that wait), `not_found` or `finished`.
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

  private async send(requests: string, client?: Queryable): Promise<string[]> {
    const rows = await this.call<{ job_id: string }>('SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)', [requests], client);
    return rows.map((row) => row.job_id);
  }

  private async call<R>(text: string, values: unknown[], client?: Queryable): Promise<R[]> {
    try {
      return (await this.runner(client).query(text, values)).rows as R[];
    } catch (error) {
      throw fromDatabaseError(error, this.pool);
    }
  }
}
