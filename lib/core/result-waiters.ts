import type { Client, Pool } from 'pg';
import { DedicatedConnection } from './connection';
import { ConnectTimeoutError, WorkhorseError, WorkhorseValidationError } from './errors';
import { PROTOCOL_LIMITS } from './limits';
import { call } from './protocol/call';
import { AWAIT_RESULTS } from './protocol/producer';
import { LISTEN_RESULTS, RESULTS_CHANNEL } from './protocol/session';
import { JobFailedError, JobNotFoundError, JobResultCanceledError, WaitForResultTimeoutError, type JobErrorEnvelope } from './result-errors';
import { checkJobId } from './validation';

export interface WaitForResultOptions {
  /**
   * Give up after this many milliseconds (at most 2^31 - 1) with a `WaitForResultTimeoutError`;
   * the job keeps running. Without it the wait lasts until the job ends (or `signal` aborts).
   * The first read always answers first: a job that has ended answers even with `timeoutMs: 0`.
   */
  timeoutMs?: number;
  /** Aborting it rejects the wait with the signal's reason (an `AbortError` by default); the job keeps running. */
  signal?: AbortSignal;
}

interface Waiter {
  resolve(result: unknown): void;
  reject(error: unknown): void;
  /** A read answered the job live since this wait began (a timeout waits for the first read). */
  read: boolean;
  /** The timeout passed before that first read. */
  timedOut: (() => void) | null;
}

interface ResultRow {
  job_id: string;
  state: 'succeeded' | 'failed' | 'canceled' | 'live' | 'not_found';
  result: unknown;
  error: JobErrorEnvelope | null;
}

const MAX_TIMEOUT_MS = 2 ** 31 - 1;
const BATCH = PROTOCOL_LIMITS.results.batchSize.max;

/**
 * The waits of one `Queue`: every waiter of the process shares one LISTEN connection (opened at
 * the first wait, closed when the last one settles) and the reads are batched, one
 * `await_results_v1` call for up to 1000 ids. A wait's first read registers its job, so the
 * job's end notifies `workhorse_results`; the notified ids are read together. Every `pollMs` all
 * awaited ids are read again (which also renews their registration and reconnects a broken
 * listener), so a lost notification or a reconnect costs latency, never a hung waiter.
 */
export class ResultWaiters {
  private readonly waiting = new Map<string, Set<Waiter>>();
  /** Ids to read at the next flush. */
  private readonly due = new Set<string>();
  private connection: DedicatedConnection | null = null;
  private flushing: Promise<void> | null = null;
  private flushQueued = false;
  private pollTimer: NodeJS.Timeout | null = null;
  /** The last attempt to open the listener failed (reads wait for the next poll). */
  private unreachable = false;
  private readonly ttlSeconds: number;

  constructor(
    private readonly pool: Pool,
    private readonly pollMs: number = PROTOCOL_LIMITS.results.pollMs.default,
  ) {
    const { ttlSeconds } = PROTOCOL_LIMITS.results;
    // A registration outlives a few polls, each of which renews it.
    this.ttlSeconds = Math.min(ttlSeconds.max, Math.max(ttlSeconds.default, Math.ceil((3 * pollMs) / 1000)));
  }

  /** How many jobs are awaited right now (distinct ids). */
  get size(): number {
    return this.waiting.size;
  }

  wait(jobId: string, options: WaitForResultOptions = {}): Promise<unknown> {
    checkJobId(jobId);
    const { timeoutMs, signal } = options;
    if (timeoutMs !== undefined && (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > MAX_TIMEOUT_MS)) {
      throw new WorkhorseValidationError('timeoutMs', `must be a whole number of milliseconds from 0 to ${MAX_TIMEOUT_MS}`);
    }
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw new WorkhorseValidationError('signal', 'must be an AbortSignal');
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (): void => settle(() => reject(signal?.reason));
      const settle = (done: () => void): void => {
        if (!this.remove(jobId, waiter)) return;
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        done();
      };
      const waiter: Waiter = {
        resolve: (result) => settle(() => resolve(result)),
        reject: (error) => settle(() => reject(error)),
        read: false,
        timedOut: null,
      };
      let set = this.waiting.get(jobId);
      if (!set) this.waiting.set(jobId, (set = new Set()));
      set.add(waiter);
      if (timeoutMs !== undefined) {
        // (A job that has ended answers even with a timeout shorter than the first read.)
        const expire = (): void => waiter.reject(new WaitForResultTimeoutError(jobId, timeoutMs));
        timer = setTimeout(() => (waiter.read || this.unreachable ? expire() : (waiter.timedOut = expire)), timeoutMs);
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.start();
      this.due.add(jobId);
      this.scheduleFlush();
    });
  }

  /** Drops a waiter; false when it was settled before. The last one closes the listener. */
  private remove(jobId: string, waiter: Waiter): boolean {
    const set = this.waiting.get(jobId);
    if (!set?.delete(waiter)) return false;
    if (set.size === 0) {
      this.waiting.delete(jobId);
      this.due.delete(jobId);
    }
    if (this.waiting.size === 0) this.stop();
    return true;
  }

  private start(): void {
    if (this.connection) return;
    this.connection = new DedicatedConnection(
      this.pool.options,
      () => this.pollAll(),
      async (client: Client) => {
        client.on('notification', (message) => {
          if (message.channel !== RESULTS_CHANNEL || !message.payload) return;
          for (const id of message.payload.split(',')) if (this.waiting.has(id)) this.due.add(id);
          this.scheduleFlush();
        });
        await client.query(LISTEN_RESULTS);
        // (Re)connected: whatever ended while no listener was there is read now.
        this.pollAll();
      },
    );
    this.pollTimer = setInterval(() => this.pollAll(), this.pollMs);
  }

  private stop(): void {
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = null;
    const connection = this.connection;
    this.connection = null;
    void connection?.close();
  }

  private pollAll(): void {
    if (this.waiting.size === 0) return;
    for (const id of this.waiting.keys()) this.due.add(id);
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    // Waits and notifications of the same turn of the event loop share one read.
    setImmediate(() => {
      this.flushQueued = false;
      this.flushing ??= this.flush().finally(() => {
        this.flushing = null;
        if (this.due.size > 0) this.scheduleFlush();
      });
    });
  }

  private async flush(): Promise<void> {
    while (this.due.size > 0 && this.connection) {
      const connection = this.connection;
      try {
        // Listening first: a job that ends after its registration is then always notified.
        await connection.get();
        this.unreachable = false;
      } catch {
        this.unreachable = true;
        // No listener now: the next poll tries again (and the reads wait for it); a wait whose
        // timeout passed meanwhile ends now.
        this.due.clear();
        this.expireUnread(this.waiting.keys());
        return;
      }
      const ids = [...this.due].slice(0, BATCH);
      for (const id of ids) this.due.delete(id);
      let rows: ResultRow[];
      try {
        rows = await call<ResultRow>(this.pool, AWAIT_RESULTS, [ids, this.ttlSeconds], this.pool);
      } catch (error) {
        // A refusal of the statement (no privilege, no schema) will not pass by waiting: the waits
        // fail with it. A broken connection is tried again at the next poll.
        if (isStatementError(error)) for (const id of ids) this.settleAll(id, (w) => w.reject(error));
        else this.expireUnread(ids);
        return;
      }
      for (const row of rows) this.answer(row);
    }
  }

  private answer(row: ResultRow): void {
    switch (row.state) {
      case 'live':
        for (const waiter of [...(this.waiting.get(row.job_id) ?? [])]) {
          waiter.read = true;
          waiter.timedOut?.();
        }
        return;
      case 'succeeded':
        return this.settleAll(row.job_id, (w) => w.resolve(row.result));
      case 'failed':
        return this.settleAll(row.job_id, (w) => w.reject(new JobFailedError(row.job_id, row.error as JobErrorEnvelope)));
      case 'canceled':
        return this.settleAll(row.job_id, (w) => w.reject(new JobResultCanceledError(row.job_id, row.error as JobErrorEnvelope)));
      default:
        return this.settleAll(row.job_id, (w) => w.reject(new JobNotFoundError(row.job_id)));
    }
  }

  /** Ends the waits of these jobs whose timeout passed before any read could answer them. */
  private expireUnread(jobIds: Iterable<string>): void {
    for (const id of [...jobIds]) this.settleAll(id, (w) => w.timedOut?.());
  }

  private settleAll(jobId: string, settle: (waiter: Waiter) => void): void {
    for (const waiter of [...(this.waiting.get(jobId) ?? [])]) settle(waiter);
  }
}

function isStatementError(error: unknown): boolean {
  // A typed refusal (no privilege, no schema, bad input); a timed-out connect passes by waiting.
  if (error instanceof WorkhorseError) return !(error instanceof ConnectTimeoutError);
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && code.length === 5 && !code.startsWith('08') && !code.startsWith('57');
}
