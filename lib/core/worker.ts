import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Pool, PoolClient } from 'pg';
import { HandlerContext, JobSleeping, type ClaimedJob, type RunOwner } from './context';
import {
  ExecutionTimeoutError,
  fromPgError,
  JobCanceledError,
  LeaseLostError,
  WorkerShutdownError,
  WorkerStateError,
  WorkhorseError,
  WorkhorseValidationError,
} from './errors';
import { definedHandler, isJobDefinition, type JobDefinition } from './job-definition';
import { isWorkerEventName, type WorkerEvent, type WorkerEventListener, type WorkerEventName, type WorkerEventOf } from './events';
import { failpoint } from './failpoints';
import { Heartbeater, leaseFields, type HeldLease, type LeaseListener } from './heartbeater';
import { Notifier } from './notifier';
import type { Queue } from './queue';
import { runTick } from './tick';
import type { ErrorEnvelope, JsonValue, Queryable, RetryPolicy } from './types';
import { checkInteger, checkName, checkRetryPolicy, toJsonText } from './validation';

/**
 * A job handler: receives the payload and a {@link HandlerContext}, returns the job's result
 * (JSON, at most 1 MiB). Throwing fails the attempt; the job's retry policy decides what next.
 *
 * The payload type defaults to `any` only so that unannotated handlers compile as in the
 * quick-start examples; annotate it (`async (payload: { orderId: string }, ctx) => ...`) to get
 * checking.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type JobHandlerFn<P = any, R = unknown> = (payload: P, ctx: HandlerContext) => R | Promise<R>;

/** Per-handler options of `worker.handle`. */
export interface HandlerOptions {
  /**
   * Run the handler inside a transaction (its client is `ctx.client`) that also records the
   * job's completion: database writes made through `ctx.client` commit exactly when the job
   * succeeds, so a handler whose effects are only such writes takes effect exactly once. If the
   * handler throws, its writes roll back and the failure is recorded separately.
   */
  transactional?: boolean;
  /** Retry policy for this type's jobs that were enqueued without one of their own. */
  retry?: RetryPolicy;
}

interface Registered {
  fn: JobHandlerFn<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  options: HandlerOptions;
}

export interface WorkerOptions {
  /** Queues to claim from, default `['default']`. */
  queues?: string[];
  /** Handlers running at once, 1 to 1000, default 10. */
  concurrency?: number;
  /**
   * Claim-and-complete round trips in flight at once, 1 to 4, default 1. The slots are split
   * between them, and each records its own jobs' completions and claims for its own free slots,
   * on a connection of its own at a time: the database records one batch while the worker runs
   * the handlers of another. More throughput for many short jobs at a high `concurrency` (each
   * round trip then carries hundreds of jobs; 2 at about 500 was the fastest configuration on 2
   * cores), for more database CPU per job; slower with small lanes. See docs/workers.md.
   */
  roundTrips?: number;
  /** Lease length in ms, default 30 000. A job whose lease is not renewed within it is recovered. */
  leaseMs?: number;
  /** Heartbeat interval in ms, default a third of the lease. */
  heartbeatMs?: number;
  /** Poll interval in ms when no notification arrives, default 1000 (jittered, backing off to 5x while idle). */
  pollMs?: number;
  /** Maintenance (promotion, recovery) interval in ms, default 1000. */
  tickMs?: number;
  /** How long `stop()` lets running handlers finish before aborting them, default 25 000 ms. */
  shutdownTimeoutMs?: number;
  /**
   * Wake up on LISTEN/NOTIFY (default true). Behind a transaction-pooling PgBouncer, NOTIFY does
   * not reach a pooled LISTEN: either give `{ connectionString }` of a direct connection to the
   * server for the listener alone, or `false` for polling only (latency = `pollMs`).
   */
  listen?: boolean | { connectionString: string };
  /** Identifies this worker in leases and history. Default `host:pid:random`. */
  workerId?: string;
  /** Delay before a job of a type this worker has no handler for may be claimed again, default 5000 ms. */
  unknownTypeDelayMs?: number;
}

const OPTION_KEYS = new Set([
  'queues',
  'concurrency',
  'roundTrips',
  'leaseMs',
  'heartbeatMs',
  'pollMs',
  'tickMs',
  'shutdownTimeoutMs',
  'listen',
  'workerId',
  'unknownTypeDelayMs',
]);

/**
 * The hot path's statement, with the columns the worker uses (a lease time would only cost
 * parsing). complete_and_claim_v1 answers every completion, in the order sent, and then the
 * claimed jobs; the completions that succeeded (nearly all of them) are left out here, so only
 * the others (`canceled`, `stale`) come back, each with its job id: a row that would say
 * `succeeded` costs the server its output and the worker its parsing, and says nothing.
 */
const PUMP_SQL =
  'SELECT job_id, status, queue, type, payload, attempt, max_attempts, fence_token, execution_timeout_ms, checkpoints, waits ' +
  "FROM workhorse.complete_and_claim_v1($1, $2::jsonb, $3, $4, $5) WHERE status <> 'succeeded'";
/** Name of PUMP_SQL as a prepared statement (parsed and planned once per connection). */
const PUMP_STATEMENT = 'workhorse.complete_and_claim_v1';
/**
 * The most jobs one round trip claims, and the most completions it records (the limits of
 * complete_and_claim_v1). `concurrency` is at most 1000 too, so one round can always fill every
 * free slot of a lane: at high concurrency, large rounds share the statement's fixed cost (and
 * the commit) among more jobs. See docs/decisions.md.
 */
const MAX_ROUND = 1000;

/**
 * A named prepared statement that the server connection does not have (26000) or already has
 * (42P05): what a pooler in transaction mode that does not track prepared statements (PgBouncer
 * before 1.21, or without max_prepared_statements) answers, when consecutive statements of one
 * client reach different server connections. Nothing ran; the statement can be sent again unnamed.
 */
function isPreparedStatementMismatch(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '26000' || code === '42P05';
}

/**
 * A row of PUMP_SQL, in its column order: a completion's status, or (status `claimed`) a claimed
 * job. Rows arrive as arrays (`rowMode: 'array'`): a round trip returns a row per completion and
 * per claimed job, and an array is cheaper to build than an object with a property per column.
 */
type PumpRow = [
  jobId: string,
  status: string,
  queue: string,
  type: string,
  payload: JsonValue,
  attempt: number,
  maxAttempts: number,
  fenceToken: string,
  executionTimeoutMs: number | null,
  checkpoints: Record<string, [] | [JsonValue]> | null,
  waits: Record<string, string> | null,
];

/**
 * One round trip's share of the worker: its slots, its jobs, the completions waiting for its next
 * round trip, and the state of its pump.
 */
interface Lane {
  slots: number;
  /** Its handlers running now (started and not yet finished). */
  active: number;
  /** Bumped when the worker gives up on its running handlers (stop timeout): they no longer count. */
  generation: number;
  pending: PendingCompletion[];
  pumping: Promise<void> | null;
  scheduled: boolean;
  again: boolean;
}

/** A job the worker runs; also its lease, as the heartbeater renews it. */
interface Running extends HeldLease {
  readonly job: ClaimedJob;
  lane: Lane;
  /** Made when first needed (the handler reads ctx.signal, or the worker aborts): most jobs never need one. */
  controller: AbortController | null;
  startedAt: number;
  /** Why the worker stopped the handler or stopped caring about its outcome, if it did. */
  outcome: 'lost' | 'canceled' | 'abandoned' | 'timeout' | 'sleeping' | null;
  /** The execution timeout's local timer, if the job has one. */
  timer: NodeJS.Timeout | null;
  /** The lane generation the run counts in (see Lane.generation). */
  generation: number;
  /** The worker is done with the job (its outcome recorded, or given up). */
  finished: boolean;
  /** Called once when finished; set only while someone waits (see doneOf). */
  onDone: (() => void) | null;
}

const SETTLED: Promise<void> = Promise.resolve();

/**
 * Settles when the worker is done with the job. Made only when something waits for it (stop,
 * runOnce): a job that nobody waits for costs no promise.
 */
function doneOf(run: Running): Promise<void> {
  if (run.finished) return SETTLED;
  return new Promise((resolve) => {
    const before = run.onDone;
    run.onDone = before
      ? () => {
          before();
          resolve();
        }
      : resolve;
  });
}

function controllerOf(run: Running): AbortController {
  return (run.controller ??= new AbortController());
}

function signalOf(run: Running): AbortSignal {
  return controllerOf(run).signal;
}

function abortRun(run: Running, reason: Error): void {
  controllerOf(run).abort(reason);
}

/**
 * `[{"jobId", "fence", "result"}]` as JSON text, written directly (it runs for every job); the
 * result is JSON text already.
 */
function completionItems(batch: PendingCompletion[]): string {
  let text = '[';
  for (let i = 0; i < batch.length; i++) {
    const { run, resultText } = batch[i];
    text += `${i === 0 ? '' : ','}{${leaseFields(run.job)},"result":${resultText}}`;
  }
  return `${text}]`;
}

interface PendingCompletion {
  run: Running;
  resultText: string;
  /** Sent in a batch of its own: a batch it was in was refused, and the culprit must be found. */
  alone?: boolean;
}

type Lifecycle = 'idle' | 'running' | 'stopping';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Turns anything a handler threw into the stored `{ name, message, stack }` envelope. */
export function toErrorEnvelope(thrown: unknown): ErrorEnvelope {
  if (thrown instanceof Error) {
    const envelope: ErrorEnvelope = { name: String(thrown.name || 'Error'), message: String(thrown.message) };
    if (typeof thrown.stack === 'string') envelope.stack = thrown.stack;
    return envelope;
  }
  let message: string;
  try {
    message = typeof thrown === 'string' ? thrown : (JSON.stringify(thrown) ?? String(thrown));
  } catch {
    message = String(thrown);
  }
  return { name: 'NonErrorThrown', message };
}

// PostgreSQL cannot store NUL characters or unpaired surrogates in jsonb; error text is not
// under our control, so make it storable (U+FFFD in their place) instead of refusing it.
function storable(text: string): string {
  return text.replace(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
}

/**
 * Claims jobs from PostgreSQL and runs the handler registered for each job's type.
 *
 * It asks for exactly its free slots in one claim, wakes on LISTEN/NOTIFY with polling as the
 * fallback, renews all leases in one batched heartbeat on a connection of its own, batches
 * completions, offers maintenance ticks, and on `stop()` drains running handlers.
 *
 * @example
 * const worker = new Worker(queue, { concurrency: 10 }).handle('email.send', async (payload: { to: string }) => {
 *   await mailer.send(payload.to);
 * });
 * await worker.run(); // until worker.stop()
 */
export class Worker {
  readonly workerId: string;
  readonly queues: readonly string[];
  readonly concurrency: number;
  private readonly pool: Pool;
  private readonly leaseMs: number;
  private readonly heartbeatMs: number;
  private readonly pollMs: number;
  private readonly tickMs: number;
  private readonly shutdownTimeoutMs: number;
  private readonly listen: boolean | { connectionString: string };
  private readonly unknownTypeDelayMs: number;
  private readonly handlers = new Map<string, Registered>();
  /** Subscriptions: a listener and the event names it wants (null: all of them). */
  private readonly listeners = new Set<{ listener: WorkerEventListener; names: ReadonlySet<WorkerEventName> | null }>();
  /** The event names some listener wants ('all', or none at all: null); see wants(). */
  private wanted: ReadonlySet<WorkerEventName> | 'all' | null = null;
  private readonly running = new Map<string, Running>();
  private lifecycle: Lifecycle = 'idle';
  private paused = false;
  private heartbeater: Heartbeater | null = null;
  /** What every job's HandlerContext asks of this worker (one object for all of them). */
  private readonly runOwner: RunOwner = {
    signalOf: (run) => signalOf(run as Running),
    lost: (run) => this.loseLease(run as Running),
    slept: (run, wakeAt) => this.sleepRun(run as Running, wakeAt),
  };
  private notifier: Notifier | null = null;
  private readonly lanes: Lane[];
  private idleRounds = 0;
  private pollTimer: NodeJS.Timeout | null = null;
  private tickTimer: NodeJS.Timeout | null = null;
  private tickInFlight: Promise<void> | null = null;
  /** False once the connection path refused a prepared statement (see isPreparedStatementMismatch). */
  private prepare = true;
  private stopPromise: Promise<void> | null = null;
  private resolveRun: (() => void) | null = null;
  private readonly onPoolError = (error: Error) => this.reportError('pool', error);

  constructor(queue: Queue, options: WorkerOptions = {}) {
    if (typeof options !== 'object' || options === null) throw new WorkhorseValidationError('options', 'must be an object');
    for (const key of Object.keys(options)) {
      if (!OPTION_KEYS.has(key)) throw new WorkhorseValidationError(key, `is not a worker option (${[...OPTION_KEYS].join(', ')})`);
    }
    this.pool = queue.pool;
    const queues = options.queues ?? ['default'];
    if (!Array.isArray(queues) || queues.length === 0 || queues.length > 100) {
      throw new WorkhorseValidationError('queues', 'must list 1 to 100 queue names');
    }
    this.queues = [...new Set(queues.map((q, i) => checkName(q, `queues[${i}]`)))];
    this.concurrency = checkInteger(options.concurrency ?? 10, 'concurrency', 1, 1000);
    const roundTrips = checkInteger(options.roundTrips ?? 1, 'roundTrips', 1, 4);
    if (roundTrips > this.concurrency) {
      throw new WorkhorseValidationError('roundTrips', `must be at most concurrency (${this.concurrency})`);
    }
    this.lanes = Array.from({ length: roundTrips }, (_, i) => ({
      slots: Math.floor(this.concurrency / roundTrips) + (i < this.concurrency % roundTrips ? 1 : 0),
      active: 0,
      generation: 0,
      pending: [],
      pumping: null,
      scheduled: false,
      again: false,
    }));
    this.leaseMs = checkInteger(options.leaseMs ?? 30_000, 'leaseMs', 1000, 86_400_000);
    this.heartbeatMs = checkInteger(options.heartbeatMs ?? Math.floor(this.leaseMs / 3), 'heartbeatMs', 100, this.leaseMs);
    this.pollMs = checkInteger(options.pollMs ?? 1000, 'pollMs', 10, 600_000);
    this.tickMs = checkInteger(options.tickMs ?? 1000, 'tickMs', 10, 600_000);
    this.shutdownTimeoutMs = checkInteger(options.shutdownTimeoutMs ?? 25_000, 'shutdownTimeoutMs', 0, 3_600_000);
    this.unknownTypeDelayMs = checkInteger(options.unknownTypeDelayMs ?? 5000, 'unknownTypeDelayMs', 0, 604_800_000);
    const listen: unknown = options.listen;
    if (
      listen !== undefined &&
      typeof listen !== 'boolean' &&
      !(typeof listen === 'object' && listen !== null && typeof (listen as { connectionString?: unknown }).connectionString === 'string')
    ) {
      throw new WorkhorseValidationError('listen', 'must be true, false or { connectionString } of a direct connection');
    }
    this.listen = options.listen ?? true;
    const id = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    if (typeof id !== 'string' || id.length === 0 || id.length > 200) {
      throw new WorkhorseValidationError('workerId', 'must be a string of 1 to 200 characters');
    }
    this.workerId = id;
  }

  /**
   * Registers the handler for one job type; returns the worker for chaining. Given a definition
   * (`defineJob`), the handler's payload and result must be of its types, and a result validator
   * of the definition checks each result before it is recorded.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  handle<P = any, R = unknown>(type: string, handler: JobHandlerFn<P, R>, options?: HandlerOptions): this;
  handle<P, R, I>(definition: JobDefinition<P, R, I>, handler: JobHandlerFn<NoInfer<P>, NoInfer<R>>, options?: HandlerOptions): this;
  handle(job: string | JobDefinition<unknown, unknown, unknown>, fn: JobHandlerFn, options: HandlerOptions = {}): this {
    const type = isJobDefinition(job) ? job.type : job;
    const handler = isJobDefinition(job) && typeof fn === 'function' ? definedHandler(job, fn) : fn;
    checkName(type, 'type');
    if (typeof handler !== 'function') throw new WorkhorseValidationError('handler', 'must be a function');
    for (const key of Object.keys(options)) {
      if (key !== 'transactional' && key !== 'retry') {
        throw new WorkhorseValidationError(key, 'is not a handler option (transactional, retry)');
      }
    }
    if (options.transactional !== undefined && typeof options.transactional !== 'boolean') {
      throw new WorkhorseValidationError('transactional', 'must be true or false');
    }
    const retry = options.retry === undefined ? undefined : checkRetryPolicy(options.retry, 'retry');
    if (this.handlers.has(type)) throw new WorkerStateError(`A handler for job type "${type}" is already registered.`);
    this.handlers.set(type, { fn: handler, options: { transactional: options.transactional, retry } });
    return this;
  }

  /** Job types this worker has handlers for. */
  get types(): string[] {
    return [...this.handlers.keys()];
  }

  /**
   * Subscribes to the worker's events, all of them or only those named; returns the unsubscribe
   * function. An event that no listener wants is not even built: the per-job events
   * (`job.claimed` and how each job ended) cost the worker some CPU for every job while anyone
   * listens to them, so a listener that only needs errors should say so.
   *
   * @example
   * worker.on(['worker.error'], (event) => log.error(event.during, event.error));
   */
  on(listener: WorkerEventListener): () => void;
  on<N extends WorkerEventName>(names: readonly N[], listener: (event: WorkerEventOf<N>) => void): () => void;
  on(namesOrListener: readonly WorkerEventName[] | WorkerEventListener, listener?: (event: never) => void): () => void {
    let entry: { listener: WorkerEventListener; names: ReadonlySet<WorkerEventName> | null };
    if (typeof namesOrListener === 'function') {
      entry = { listener: namesOrListener, names: null };
    } else {
      if (!Array.isArray(namesOrListener) || namesOrListener.length === 0) {
        throw new WorkhorseValidationError('names', 'must list at least one event name');
      }
      namesOrListener.forEach((name: unknown, i) => {
        if (!isWorkerEventName(name)) throw new WorkhorseValidationError(`names[${i}]`, 'is not the name of a worker event');
      });
      if (typeof listener !== 'function') throw new WorkhorseValidationError('listener', 'must be a function');
      entry = { listener: listener as WorkerEventListener, names: new Set(namesOrListener) };
    }
    this.listeners.add(entry);
    this.updateWanted();
    return () => {
      this.listeners.delete(entry);
      this.updateWanted();
    };
  }

  private updateWanted(): void {
    const names = new Set<WorkerEventName>();
    for (const { names: only } of this.listeners) {
      if (only === null) {
        this.wanted = 'all';
        return;
      }
      for (const name of only) names.add(name);
    }
    this.wanted = names.size > 0 ? names : null;
  }

  /** Whether some listener wants events of this name (checked before building one that every job would cost). */
  private wants(name: WorkerEventName): boolean {
    const wanted = this.wanted;
    return wanted !== null && (wanted === 'all' || wanted.has(name));
  }

  /** Number of handlers running now. */
  get activeCount(): number {
    return this.running.size;
  }

  get isRunning(): boolean {
    return this.lifecycle === 'running';
  }

  /** Stops claiming new jobs; running handlers go on. */
  pause(): void {
    this.paused = true;
  }

  /** Claims again after {@link pause}. */
  resume(): void {
    this.paused = false;
    this.wake();
  }

  /**
   * Runs until {@link stop} is called: claims, executes, heartbeats and ticks. The promise
   * settles once the worker has drained and closed its connections.
   */
  async run(): Promise<void> {
    if (this.lifecycle !== 'idle') throw new WorkerStateError('This worker is already running.');
    const stopped = new Promise<void>((resolve) => {
      this.resolveRun = resolve;
    });
    this.startServices();
    if (this.listen) {
      const config =
        typeof this.listen === 'object' ? { ...this.pool.options, connectionString: this.listen.connectionString } : this.pool.options;
      this.notifier = new Notifier(config, new Set(this.queues), () => this.wake(), (e) => this.reportError('listen', e));
      this.notifier.start();
    }
    this.scheduleTick(0);
    this.emit({ name: 'worker.started', workerId: this.workerId, queues: [...this.queues], concurrency: this.concurrency });
    this.wake();
    await stopped;
  }

  /**
   * One pass for scripts and tests: a maintenance tick, one claim of up to `concurrency` jobs,
   * and those jobs run to the end. Resolves with how many jobs it ran.
   */
  async runOnce(): Promise<number> {
    if (this.lifecycle !== 'idle') throw new WorkerStateError('This worker is already running.');
    this.startServices();
    try {
      await this.tick();
      const claimed = await this.claimOnce(this.concurrency);
      await Promise.all([...this.running.values()].map(doneOf));
      await this.flush();
      return claimed;
    } finally {
      await this.stopServices();
      this.lifecycle = 'idle';
    }
  }

  /**
   * Stops claiming, lets running handlers finish for up to `shutdownTimeoutMs`, then aborts the
   * rest (their signal fires with {@link WorkerShutdownError}; nothing is recorded for them, so
   * their leases expire and another worker runs them again), and closes the worker's own
   * connections. Never fakes a success, failure or cancellation.
   */
  async stop(): Promise<void> {
    if (this.lifecycle === 'idle') return;
    this.stopPromise ??= this.drain();
    return this.stopPromise;
  }

  private startServices(): void {
    this.lifecycle = 'running';
    this.pool.on('error', this.onPoolError);
    const listener: LeaseListener = {
      lost: (jobId) => {
        const run = this.running.get(jobId);
        if (run) this.loseLease(run);
      },
      cancelRequested: (jobId) => {
        const run = this.running.get(jobId);
        if (run && run.outcome === null) {
          run.outcome = 'canceled';
          abortRun(run, new JobCanceledError(jobId));
        }
      },
    };
    const onError = (e: Error) => this.reportError('heartbeat', e);
    this.heartbeater = new Heartbeater(this.pool, this.workerId, this.leaseMs, this.heartbeatMs, onError, listener, this.running);
    this.heartbeater.start();
  }

  private async stopServices(): Promise<void> {
    await this.heartbeater?.stop();
    this.heartbeater = null;
    await this.notifier?.stop();
    this.notifier = null;
    this.pool.off('error', this.onPoolError);
  }

  private async drain(): Promise<void> {
    this.lifecycle = 'stopping';
    if (this.pollTimer) clearTimeout(this.pollTimer);
    if (this.tickTimer) clearTimeout(this.tickTimer);
    this.pollTimer = this.tickTimer = null;
    await this.tickInFlight;
    const all = Promise.all([...this.running.values()].map(doneOf));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      all.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), this.shutdownTimeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      for (const run of this.running.values()) {
        run.outcome ??= 'abandoned';
        abortRun(run, new WorkerShutdownError(run.job.jobId));
        run.renewing = false;
        this.emit({ name: 'job.abandoned', ...this.endedFields(run) });
      }
      this.running.clear();
      for (const lane of this.lanes) {
        lane.active = 0;
        lane.generation++;
      }
    }
    await this.flush();
    await this.stopServices();
    this.lifecycle = 'idle';
    this.stopPromise = null;
    this.emit({ name: 'worker.stopped', workerId: this.workerId });
    this.resolveRun?.();
    this.resolveRun = null;
  }

  // ---- claiming and completing ----------------------------------------------------------------
  //
  // A "pump" talks to the database for the hot path: each round trip records the completions
  // that gathered since the last one AND claims as many jobs as slots will then be free, in one
  // statement and one commit (`complete_and_claim_v1`). Commits are what a durable queue pays
  // for; sharing one between a batch of completions and the next claim halves them. Completions
  // that arrive while a round trip is in flight simply go in the next one, and a slot freed by a
  // failure or release wakes the pump too. There is one pump per lane (`roundTrips`, default 1):
  // a lane owns a share of the slots, and its pump records the completions of its own jobs and
  // claims for its own free slots only, so lanes never wait for one another.

  /** Asks every lane for a round (work may have arrived, or claiming may go on). */
  private wake(): void {
    for (const lane of this.lanes) this.wakeLane(lane);
  }

  /** Asks a lane's pump for a round as soon as possible (coalescing everything that happens meanwhile). */
  private wakeLane(lane: Lane): void {
    if (lane.pumping) {
      lane.again = true;
      return;
    }
    if (lane.scheduled) return;
    lane.scheduled = true;
    // setImmediate lets every handler that finishes in this turn of the event loop join the batch.
    setImmediate(() => {
      lane.scheduled = false;
      lane.pumping ??= this.pump(lane).finally(() => {
        lane.pumping = null;
        if (lane.again) {
          lane.again = false;
          this.wakeLane(lane);
        }
      });
    });
  }

  private get claiming(): boolean {
    return this.lifecycle === 'running' && !this.paused && this.resolveRun !== null;
  }

  private async pump(lane: Lane): Promise<void> {
    let failures = 0;
    for (;;) {
      lane.again = false;
      const batch = lane.pending.splice(0, lane.pending[0]?.alone ? 1 : MAX_ROUND);
      // Slots held by the runs in this batch are free once the batch is recorded.
      const want = this.claiming ? Math.min(MAX_ROUND, lane.slots - lane.active + batch.length) : 0;
      if (batch.length === 0 && want <= 0) return;
      if (this.pollTimer && want > 0) clearTimeout(this.pollTimer);
      if (want > 0) this.pollTimer = null;
      const sentAt = Date.now();
      let rows: PumpRow[];
      try {
        if (batch.length > 0) failpoint('before-complete');
        rows = await this.pumpQuery(completionItems(batch), Math.max(want, 0));
        if (batch.length > 0) failpoint('after-complete');
      } catch (error) {
        const typed = fromPgError(error);
        if (typed instanceof WorkhorseError) {
          if (batch.length === 1) {
            // The database refused the result itself (a typed error): that fails the attempt.
            this.settleLater(batch[0].run, this.settleFailure(batch[0].run, typed));
          } else {
            // One refused result (e.g. over the size limit) fails the whole statement: send each
            // completion of the batch on its own so only the culprit is refused.
            for (const p of batch) p.alone = true;
            lane.pending.unshift(...batch);
          }
          continue;
        }
        // The database could not be reached, or the commit's fate is unknown. Completions are
        // tried again while we still hold their leases (heartbeats keep them alive meanwhile):
        // one that did commit is recognised by its fence and answers `succeeded` again, never a
        // second outcome. Jobs a lost claim may have taken are recovered when their leases expire.
        this.reportError(batch.length > 0 ? 'complete' : 'claim', error as Error);
        failures++;
        const owned = batch.filter((p) => p.run.outcome !== 'lost' && p.run.outcome !== 'abandoned');
        for (const p of batch) if (!owned.includes(p)) this.completed(p.run, 'stale');
        lane.pending.unshift(...owned);
        if (owned.length === 0 && !this.claiming) return;
        if (owned.length === 0) {
          this.idleRounds++;
          this.schedulePoll();
          return;
        }
        await delay(Math.min(2000, 50 * 2 ** failures) * (0.5 + Math.random() / 2));
        continue;
      }
      failures = 0;
      // The completions that did not succeed come first, by job id; the claimed jobs follow (PUMP_SQL).
      let first = 0;
      let unsucceeded: Map<string, string> | null = null;
      for (; first < rows.length && rows[first][1] !== 'claimed'; first++) (unsucceeded ??= new Map()).set(rows[first][0], rows[first][1]);
      for (const p of batch) this.completed(p.run, unsucceeded?.get(p.run.job.jobId) ?? 'succeeded');
      const claimed = first === 0 ? rows : rows.slice(first);
      const claimedAt = Date.now();
      if (claimed.length > 0) failpoint('after-claim');
      for (const row of claimed) this.start(row, lane, sentAt, claimedAt);
      if (want > 0) {
        if (claimed.length < want) {
          // The queues ran dry: wait for a notification or the next poll.
          this.idleRounds++;
          this.schedulePoll();
          if (lane.pending.length === 0) return;
        } else {
          this.idleRounds = 0;
        }
      }
    }
  }

  // Idle backoff: each empty claim stretches the next poll, up to five times pollMs.
  private schedulePoll(): void {
    if (this.pollTimer || !this.claiming) return;
    const base = this.pollMs * Math.min(5, 1 + this.idleRounds / 4);
    this.pollTimer = setTimeout(() => {
      this.pollTimer = null;
      this.wake();
    }, base * (0.8 + Math.random() * 0.4));
  }

  /**
   * One `complete_and_claim_v1` round trip: prepared once per connection where the path allows.
   * A connection that refuses the prepared statement ran nothing, so the same round trip is sent
   * again unprepared, and so are all later ones.
   */
  private async pumpQuery(items: string, limit: number): Promise<PumpRow[]> {
    const values = [this.workerId, items, this.queues, limit, this.leaseMs];
    if (this.prepare) {
      try {
        return (await this.pool.query<PumpRow>({ name: PUMP_STATEMENT, text: PUMP_SQL, values, rowMode: 'array' })).rows;
      } catch (error) {
        if (!isPreparedStatementMismatch(error)) throw error;
        this.prepare = false;
      }
    }
    return (await this.pool.query<PumpRow>({ text: PUMP_SQL, values, rowMode: 'array' })).rows;
  }

  /** For `runOnce`: one claim of up to `limit` jobs, started at once. */
  private async claimOnce(limit: number): Promise<number> {
    const sentAt = Date.now();
    const rows = await this.pumpQuery('[]', Math.min(limit, MAX_ROUND));
    const claimedAt = Date.now();
    for (const row of rows) this.start(row, this.lanes[0], sentAt, claimedAt);
    return rows.length;
  }

  // ---- executing ------------------------------------------------------------------------------

  private start(row: PumpRow, lane: Lane, sentAt: number, claimedAt: number): void {
    const [jobId, , queue, type, payload, attempt, maxAttempts, fenceToken, timeoutMs, checkpoints, waits] = row;
    const job: ClaimedJob = {
      jobId,
      queue,
      type,
      attempt,
      maxAttempts,
      fenceToken,
      workerId: this.workerId,
      checkpoints,
      waits,
    };
    const run: Running = {
      deadline: sentAt + this.leaseMs,
      renewing: true,
      job,
      lane,
      controller: null,
      startedAt: claimedAt,
      outcome: null,
      timer: null,
      generation: lane.generation,
      finished: false,
      onDone: null,
    };
    this.running.set(job.jobId, run);
    lane.active++;
    // (Nothing to build when nobody listens: this runs for every job.)
    if (this.wants('job.claimed')) this.emit({ name: 'job.claimed', ...this.jobFields(job) });
    // The server closes the attempt at the same moment by its own clock (counted from the claim,
    // which happened before `claimedAt`); this timer only tells the handler sooner.
    if (timeoutMs !== null) {
      run.timer = setTimeout(() => {
        if (run.outcome === null) {
          run.outcome = 'timeout';
          abortRun(run, new ExecutionTimeoutError(job.jobId, timeoutMs));
        }
      }, Math.max(0, sentAt + timeoutMs - Date.now()));
    }
    this.execute(run, payload);
  }

  /** The job is over for this worker (recorded, given up or abandoned): its slot is free. */
  private finish(run: Running): void {
    if (run.finished) return;
    run.finished = true;
    if (run.timer) clearTimeout(run.timer);
    const { job, lane } = run;
    run.renewing = false;
    if (this.running.get(job.jobId) === run) this.running.delete(job.jobId);
    if (run.generation === lane.generation) lane.active--;
    this.wakeLane(lane);
    if (run.onDone) {
      const onDone = run.onDone;
      run.onDone = null;
      onDone();
    }
  }

  private loseLease(run: Running): void {
    if (run.outcome === 'lost' || run.outcome === 'abandoned') return;
    run.outcome = 'lost';
    abortRun(run, new LeaseLostError(run.job.jobId));
  }

  // A job's way through the worker, for a plain (not transactional) handler: the handler's
  // promise settles -> handlerReturned queues the completion for the lane's next round trip ->
  // the round trip answers -> completed() reports the status and frees the slot. Callbacks, not
  // an async function per job: this runs for every job, and each await would cost a promise and
  // a hop through the microtask queue. Every other path (no handler, a transactional handler, a
  // failure) is an async function whose end settleLater() waits for.
  private execute(run: Running, payload: JsonValue): void {
    const handler = this.handlers.get(run.job.type);
    if (!handler) {
      this.settleLater(run, this.release(run, `no handler for job type "${run.job.type}" on worker ${this.workerId}`));
      return;
    }
    if (handler.options.transactional) {
      this.settleLater(run, this.executeInTransaction(run, handler.fn, payload));
      return;
    }
    let result: unknown;
    try {
      failpoint('before-handler');
      result = handler.fn(payload, this.context(run, this.pool));
    } catch (thrown) {
      this.handlerThrew(run, thrown);
      return;
    }
    Promise.resolve(result).then(
      (value) => this.handlerReturned(run, value),
      (thrown) => this.handlerThrew(run, thrown),
    );
  }

  private handlerReturned(run: Running, value: unknown): void {
    let resultText: string;
    try {
      resultText = this.resultText(run, value);
    } catch (thrown) {
      this.handlerThrew(run, thrown);
      return;
    }
    run.lane.pending.push({ run, resultText });
    this.wakeLane(run.lane);
  }

  private handlerThrew(run: Running, thrown: unknown): void {
    this.settleLater(run, this.settleFailure(run, thrown));
  }

  /** The lane's round trip recorded the job's completion (or found it stale): report it, free the slot. */
  private completed(run: Running, status: string): void {
    this.settleStatus(run, status, null);
    this.finish(run);
  }

  /** Frees the job's slot once `work` (which records or reports how the job ended) is over. */
  private settleLater(run: Running, work: Promise<void>): void {
    work.then(
      () => this.finish(run),
      (error: unknown) => {
        // A write that could not reach the database: the lease will expire and the job run again.
        this.reportError('complete', error as Error);
        this.finish(run);
      },
    );
  }

  private context(run: Running, runner: Queryable, client?: PoolClient): HandlerContext {
    return new HandlerContext(run.job, this.runOwner, run, runner, this.pool, client);
  }

  private sleepRun(run: Running, wakeAt: Date): void {
    if (run.outcome !== null) return;
    run.outcome = 'sleeping';
    run.renewing = false;
    abortRun(run, new JobSleeping(run.job.jobId, wakeAt));
    this.emit({ name: 'job.sleeping', ...this.jobFields(run.job), wakeAt });
  }

  /** Runs the handler and checks its result; `ok: false` carries what it threw. */
  private async invoke(
    run: Running,
    fn: JobHandlerFn,
    payload: JsonValue,
    ctx: HandlerContext,
  ): Promise<{ ok: true; resultText: string } | { ok: false; thrown: unknown }> {
    try {
      failpoint('before-handler');
      return { ok: true, resultText: this.resultText(run, await fn(payload, ctx)) };
    } catch (thrown) {
      return { ok: false, thrown };
    }
  }

  /**
   * A handler's returned value as the job's result (JSON text). Throws what the attempt fails
   * with instead: the value is not JSON, or the worker stopped caring about the job (lease lost,
   * abandoned, asleep) while the handler ran.
   */
  private resultText(run: Running, value: unknown): string {
    failpoint('after-handler');
    if (run.outcome === 'lost' || run.outcome === 'abandoned' || run.outcome === 'sleeping') throw signalOf(run).reason;
    return value === undefined ? 'null' : toJsonText(value, 'result');
  }

  // The handler's writes and the completion share one transaction: both commit, or neither.
  private async executeInTransaction(run: Running, fn: JobHandlerFn, payload: JsonValue): Promise<void> {
    const { job } = run;
    const client = await this.pool.connect();
    // A checked-out client whose connection breaks emits `error`; without a listener that would
    // crash the process. The failure reaches us through the next query instead.
    let broken: Error | undefined;
    const onClientError = (error: Error) => {
      broken = error;
      this.reportError('transaction', error);
    };
    client.on('error', onClientError);
    let status: string | null = null;
    let thrown: unknown = null;
    try {
      await client.query('BEGIN');
      const ctx = this.context(run, client, client);
      const outcome = await this.invoke(run, fn, payload, ctx);
      if (outcome.ok) {
        failpoint('before-complete');
        const result = await client.query<{ status: string }>(
          'SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status',
          [job.jobId, this.workerId, job.fenceToken, outcome.resultText],
        );
        status = result.rows[0].status;
      } else {
        thrown = outcome.thrown;
      }
      if (status === 'succeeded') {
        await client.query('COMMIT');
        failpoint('after-complete');
      } else {
        // Failed, stale or canceled meanwhile: none of the handler's writes may stay.
        await client.query('ROLLBACK');
      }
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      thrown ??= error;
      status = null;
    } finally {
      client.off('error', onClientError);
      // A broken connection is destroyed rather than given back to the pool.
      client.release(broken);
    }
    if (status === 'succeeded' || status === 'stale') {
      this.settleStatus(run, status, null);
    } else if (status === 'canceled') {
      run.outcome = 'canceled';
      await this.settleFailure(run, new JobCanceledError(job.jobId));
    } else {
      await this.settleFailure(run, thrown);
    }
  }

  private async settleFailure(run: Running, thrown: unknown): Promise<void> {
    const { job } = run;
    // The job sleeps: the database already holds its new state, there is nothing to record.
    if (run.outcome === 'sleeping') return;
    if (run.outcome === 'lost' || run.outcome === 'abandoned') {
      this.reportLost(run);
      return;
    }
    if (run.outcome === 'canceled') {
      const status = await this.ownerCall('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3) AS status', [
        job.jobId,
        this.workerId,
        job.fenceToken,
      ]);
      this.settleStatus(run, status, null);
      return;
    }
    const options: { retryDelayMs?: number; nonRetryable?: boolean; attemptOutcome?: string; retryPolicy?: RetryPolicy } = {};
    const control = thrown as { retryable?: unknown; retryDelayMs?: unknown } | null;
    if (control && typeof control === 'object') {
      if (control.retryable === false) options.nonRetryable = true;
      const ms = control.retryDelayMs;
      if (typeof ms === 'number' && Number.isInteger(ms) && ms >= 0 && ms <= 604_800_000) options.retryDelayMs = ms;
    }
    if (run.outcome === 'timeout') options.attemptOutcome = 'timeout';
    const retry = this.handlers.get(job.type)?.options.retry;
    if (retry) options.retryPolicy = retry;
    const error = toErrorEnvelope(thrown);
    error.name = storable(error.name);
    error.message = storable(error.message);
    if (error.stack !== undefined) error.stack = storable(error.stack);
    const result = await this.pool
      .query<{ status: string; run_at: Date | null; delay_ms: string | null }>(
        'SELECT status, run_at, delay_ms FROM workhorse.fail_v1($1, $2, $3, $4::jsonb, $5::jsonb)',
        [job.jobId, this.workerId, job.fenceToken, JSON.stringify(error), JSON.stringify(options)],
      )
      .catch((e: unknown) => Promise.reject(fromPgError(e)));
    const row = result.rows[0];
    if (row.status === 'retry_scheduled') {
      this.emit({
        name: 'job.retry_scheduled',
        ...this.endedFields(run),
        error,
        runAt: row.run_at as Date,
        delayMs: Number(row.delay_ms),
      });
    } else {
      this.settleStatus(run, row.status, error);
    }
  }

  /** Reports how a job ended, as an event (nothing to build when nobody listens: it runs for every job). */
  private settleStatus(run: Running, status: string, error: ErrorEnvelope | null): void {
    if (status === 'succeeded') {
      if (this.wants('job.succeeded')) this.emit({ name: 'job.succeeded', ...this.endedFields(run) });
    } else if (status === 'canceled') {
      if (this.wants('job.canceled')) this.emit({ name: 'job.canceled', ...this.endedFields(run) });
    } else if (status === 'failed' && error) {
      if (this.wants('job.failed')) this.emit({ name: 'job.failed', ...this.endedFields(run), error });
    } else if (status === 'stale') {
      this.reportLost(run);
    }
  }

  private reportLost(run: Running): void {
    if (run.outcome === 'abandoned') return;
    this.emit({ name: 'job.lease_lost', ...this.endedFields(run) });
  }

  private async release(run: Running, reason: string): Promise<void> {
    const status = await this.ownerCall('SELECT workhorse.release_v1($1, $2, $3, $4, $5) AS status', [
      run.job.jobId,
      this.workerId,
      run.job.fenceToken,
      this.unknownTypeDelayMs,
      reason,
    ]);
    if (status === 'released') this.emit({ name: 'job.released', ...this.jobFields(run.job), reason });
    else this.settleStatus(run, status, null);
  }

  private async ownerCall(text: string, values: unknown[]): Promise<string> {
    try {
      const result = await this.pool.query<{ status: string }>(text, values);
      return result.rows[0].status;
    } catch (error) {
      throw fromPgError(error);
    }
  }

  // ---- completion -----------------------------------------------------------------------------

  /** Waits until every queued completion is recorded (or given up). */
  private async flush(): Promise<void> {
    const busy = () => this.lanes.find((l) => l.pending.length > 0 || l.pumping !== null || l.scheduled);
    for (let lane = busy(); lane !== undefined; lane = busy()) {
      if (lane.pumping) await lane.pumping;
      else await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  // ---- maintenance ----------------------------------------------------------------------------

  private scheduleTick(delay: number): void {
    if (this.lifecycle !== 'running') return;
    this.tickTimer = setTimeout(() => {
      this.tickTimer = null;
      this.tickInFlight = this.tick().finally(() => {
        this.tickInFlight = null;
        this.scheduleTick(this.tickMs * (0.8 + Math.random() * 0.4));
      });
    }, delay);
    this.tickTimer.unref();
  }

  private async tick(): Promise<void> {
    try {
      await runTick(this.pool);
    } catch (error) {
      this.reportError('tick', error as Error);
    }
  }

  // ---- events ---------------------------------------------------------------------------------

  private jobFields(job: ClaimedJob) {
    return { jobId: job.jobId, type: job.type, queue: job.queue, attempt: job.attempt, workerId: this.workerId };
  }

  /** jobFields and how long the job ran here, for the events of a job that is over for this worker. */
  private endedFields(run: Running) {
    return { ...this.jobFields(run.job), durationMs: Date.now() - run.startedAt };
  }

  private reportError(during: string, error: Error): void {
    this.emit({ name: 'worker.error', workerId: this.workerId, during, error });
  }

  private emit(event: WorkerEvent): void {
    for (const { listener, names } of this.listeners) {
      if (names !== null && !names.has(event.name)) continue;
      try {
        listener(event);
      } catch (error) {
        if (event.name !== 'worker.error') this.reportError('listener', error as Error);
      }
    }
  }
}
