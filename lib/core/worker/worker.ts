import type { Pool } from 'pg';
import { WorkerStateError, WorkhorseValidationError } from '../errors';
import type { WorkerEventListener, WorkerEventName, WorkerEventOf, WorkerGroupInfo } from '../events';
import { definedHandler, isJobDefinition, type JobDefinition } from '../job-definition';
import { Notifier } from '../notifier';
import { verifySchema } from '../schema';
import type { Queue } from '../queue';
import { checkName } from '../validation';
import { EventHub } from './event-hub';
import { EventLog } from './event-log';
import { whenFinished } from './execution';
import { Executor } from './executor';
import { Heartbeater } from './heartbeater';
import { OwnerStatements } from '../protocol/owner-statements';
import { Registration } from './registration';
import { activeMeter, JobMetrics } from '../telemetry/job-metrics';
import { JobTracing } from '../telemetry/job-tracing';
import { observeQueueDepth } from '../telemetry/queue-depth';
import { RoundTrips } from './round-trips';
import { waitForSchema } from './schema-wait';
import { Ticker } from './ticker';
import { checkHandlerOptions, checkWorkerOptions, type HandlerOptions, type JobHandlerFn, type WorkerGroupSettings, type WorkerOptions, type WorkerSettings } from './worker-options';

type Lifecycle = 'idle' | 'starting' | 'running' | 'stopping';

/** A group of a worker's slots now (see `WorkerOptions.groups`). */
export interface WorkerGroupStatus extends WorkerGroupInfo {
  /** Jobs of the group that the worker executes now (each holds one of the group's slots). */
  activeCount: number;
}

/**
 * Claims jobs from PostgreSQL and runs the handler registered for each job's type.
 *
 * It asks for exactly its free slots in one claim, wakes on LISTEN/NOTIFY with polling as the
 * fallback, renews all leases in one batched heartbeat on a connection of its own, batches
 * completions, offers maintenance ticks, and on `stop()` drains running handlers.
 *
 * Its parts: {@link RoundTrips} (claims and completions), {@link Executor} (runs handlers and
 * records how their jobs ended), {@link Heartbeater} (leases), {@link Ticker} (maintenance),
 * {@link Notifier} (LISTEN), {@link EventHub} (events); this class is their lifecycle.
 *
 * Its slots may be split into groups (`groups`), each with its own queues and concurrency and
 * its own round trips: a flood in one group never takes the slots of another. Everything else
 * (handlers, leases, LISTEN, maintenance, the registry, shutdown) is the worker's, shared.
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
  private readonly settings: WorkerSettings;
  private readonly pool: Pool;
  private readonly hub: EventHub;
  private readonly executor: Executor;
  /** One per group, in the order of `groups`. */
  private readonly trips: readonly RoundTrips[];
  /** The group of each queue (a queue belongs to one group). */
  private readonly tripsOf = new Map<string, RoundTrips>();
  private readonly ticker: Ticker;
  private heartbeater: Heartbeater | null = null;
  private registration: Registration | null = null;
  /** Stops the queue depth gauge (with an OpenTelemetry SDK). */
  private stopObserving: (() => void) | null = null;
  private notifier: Notifier | null = null;
  private lifecycle: Lifecycle = 'idle';
  private paused = false;
  /** An operator asked this worker to drain (`workhorse workers drain`): it claims no more. */
  private drainRequested = false;
  private stopPromise: Promise<void> | null = null;
  /** While run() checks the schema: the check, and how to stop it. */
  private starting: { abort: AbortController; schema: Promise<boolean> } | null = null;
  private resolveRun: (() => void) | null = null;
  private readonly onPoolError = (error: Error) => this.hub.reportError('pool', error);

  constructor(queue: Queue, options: WorkerOptions = {}) {
    this.settings = checkWorkerOptions(options);
    this.workerId = this.settings.workerId;
    this.queues = this.settings.queues;
    this.concurrency = this.settings.concurrency;
    this.pool = queue.pool;
    this.hub = new EventHub(this.workerId);
    if (this.settings.logger) {
      const log = new EventLog(this.settings.logger);
      this.hub.on(log.names, (event) => log.write(event));
    }
    const statements = new OwnerStatements(this.pool, this.settings);
    this.executor = new Executor(this.pool, this.settings, statements, this.hub);
    this.trips = this.settings.groups.map((group) => new RoundTrips(this.settings, group, statements, this.executor, this.hub, () => this.claiming));
    for (const trips of this.trips) for (const queue of trips.group.queues) this.tripsOf.set(queue, trips);
    this.ticker = new Ticker(this.pool, this.settings.tickMs, this.hub, this.workerId, this.queues, () =>
      [...this.executor.handlers].map(([type, handler]) => ({ type, retry: handler.settings.retry })),
    );
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
    const settings = checkHandlerOptions(options);
    if (this.executor.handlers.has(type)) throw new WorkerStateError(`A handler for job type "${type}" is already registered.`);
    this.executor.handlers.set(type, { fn: handler, settings });
    return this;
  }

  /** Job types this worker has handlers for. */
  get types(): string[] {
    return [...this.executor.handlers.keys()];
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
    return typeof namesOrListener === 'function'
      ? this.hub.on(namesOrListener)
      : this.hub.on(namesOrListener, listener as (event: WorkerEventOf<WorkerEventName>) => void);
  }

  /** The worker's groups (one, named after its queues, unless `groups` was given), with the jobs each executes now. */
  get groups(): WorkerGroupStatus[] {
    return this.trips.map(({ group, lanes }) => ({
      ...groupInfo(group),
      activeCount: lanes.reduce((sum, lane) => sum + lane.active, 0),
    }));
  }

  /** Number of jobs this worker executes now (each holds a slot). */
  get activeCount(): number {
    return this.executor.executions.size;
  }

  /**
   * Number of handlers this worker abandoned (they did not return `abandonAfterMs` after their
   * attempt was over, or at shutdown) that are still running: they hold no slot, but whatever
   * they hold (memory, sockets) is still held. See `job.abandoned`.
   */
  get abandonedCount(): number {
    return this.executor.interrupter.abandonedCount;
  }

  get isRunning(): boolean {
    return this.lifecycle === 'running';
  }

  /**
   * An operator asked this worker to drain (`admin.drainWorker`, `workhorse workers drain`): it
   * claims no more jobs and finishes those it holds, then stays idle until it is stopped (a
   * drain is for taking a worker out of service before stopping its process).
   */
  get isDraining(): boolean {
    return this.drainRequested;
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
   * settles once the worker has drained and closed its connections. It first checks the schema:
   * it rejects at once with {@link SchemaNotInstalledError} (saying what to run) or
   * {@link SchemaVersionMismatchError} when the database holds no or another schema, and waits
   * while the database cannot be reached (each failure a `worker.error` during `start`).
   */
  async run(): Promise<void> {
    if (this.lifecycle !== 'idle') throw new WorkerStateError('This worker is already running.');
    this.lifecycle = 'starting';
    const starting = new AbortController();
    // Listens from the start: an idle connection that breaks while the schema check waits must
    // be reported, not crash the process (a pool emits 'error' to nobody otherwise).
    this.listenToPool();
    this.starting = { abort: starting, schema: waitForSchema(this.pool, this.hub, starting.signal) };
    try {
      // False: stopped before the database answered. Aborted: stop() came while the check was
      // answering, and returned without draining, so nothing may start.
      if (!(await this.starting.schema) || starting.signal.aborted) {
        this.pool.off('error', this.onPoolError);
        return;
      }
    } catch (error) {
      this.pool.off('error', this.onPoolError);
      throw error;
    } finally {
      this.starting = null;
      if (this.lifecycle === 'starting') this.lifecycle = 'idle';
    }
    const stopped = new Promise<void>((resolve) => {
      this.resolveRun = resolve;
    });
    this.startServices();
    const { listen } = this.settings;
    if (listen) {
      const config = typeof listen === 'object' ? { ...this.pool.options, connectionString: listen.connectionString } : this.pool.options;
      this.notifier = new Notifier(
        config,
        new Set(this.queues),
        (queue) => this.hint(queue),
        (e) => this.hub.reportError('listen', e),
        () => this.hub.reportSuccess('listen'),
      );
      this.notifier.start();
    }
    this.ticker.start();
    this.registration = new Registration(this.pool, this, this.settings.heartbeatMs, this.hub, () => this.onDrainRequested());
    this.registration.start();
    const meter = activeMeter();
    const { queueDepth } = this.settings;
    if (meter && queueDepth !== false) this.stopObserving = observeQueueDepth(meter, this.pool, this.queues, queueDepth === 'all');
    const groups = this.settings.groups.map(groupInfo);
    this.hub.emit({ name: 'worker.started', workerId: this.workerId, queues: [...this.queues], concurrency: this.concurrency, groups });
    this.wake();
    await stopped;
  }

  /**
   * One pass for scripts and tests: a maintenance tick, one claim per group of up to its
   * `concurrency` jobs, and those jobs run to the end. Resolves with how many jobs it ran; rejects with
   * {@link SchemaNotInstalledError} or {@link SchemaVersionMismatchError} before anything else
   * when the database holds no or another schema.
   */
  async runOnce(): Promise<number> {
    if (this.lifecycle !== 'idle') throw new WorkerStateError('This worker is already running.');
    this.lifecycle = 'starting';
    try {
      await verifySchema(this.pool);
    } finally {
      this.lifecycle = 'idle';
    }
    this.startServices();
    try {
      await this.ticker.tick();
      const claimed = await Promise.all(this.trips.map((trips) => trips.claimOnce(trips.group.concurrency)));
      await Promise.all([...this.executor.executions.values()].map(whenFinished));
      await this.flush();
      return claimed.reduce((sum, n) => sum + n, 0);
    } finally {
      await this.stopServices();
      this.lifecycle = 'idle';
    }
  }

  /**
   * Stops claiming, lets running handlers finish for up to `shutdownTimeoutMs`, then abandons
   * the rest (their signal fires with {@link WorkerShutdownError}; nothing is recorded for them,
   * so their leases expire and another worker runs them again), and closes the worker's own
   * connections. Never fakes a success, failure or cancellation.
   */
  async stop(): Promise<void> {
    if (this.starting) {
      // Still checking the schema: nothing runs yet, so there is nothing to drain.
      this.starting.abort.abort();
      await this.starting.schema.catch(() => undefined);
      return;
    }
    if (this.lifecycle === 'idle' || this.lifecycle === 'starting') return;
    this.stopPromise ??= this.drain();
    return this.stopPromise;
  }

  private get claiming(): boolean {
    return this.lifecycle === 'running' && !this.paused && !this.drainRequested && this.resolveRun !== null;
  }

  private wake(): void {
    for (const trips of this.trips) trips.wake();
  }

  /** A notification for `queue` wakes its group; one without a queue (after a reconnect) every group. */
  private hint(queue?: string): void {
    if (queue === undefined) for (const trips of this.trips) trips.hint();
    else this.tripsOf.get(queue)?.hint();
  }

  private stopPolling(): void {
    for (const trips of this.trips) trips.stopPolling();
  }

  private async flush(): Promise<void> {
    for (const trips of this.trips) await trips.flush();
  }

  private onDrainRequested(): void {
    if (this.drainRequested) return;
    this.drainRequested = true;
    this.stopPolling();
    this.hub.emit({ name: 'worker.draining', workerId: this.workerId, activeCount: this.activeCount });
    // Report as soon as the last job is done, so the registry shows the worker as drained.
    void Promise.all([...this.executor.executions.values()].map(whenFinished)).then(() => this.registration?.reportNow());
  }

  private startServices(): void {
    this.lifecycle = 'running';
    // Resolved at each start: the application may register its SDK after building the worker.
    const metrics = JobMetrics.active();
    this.executor.metrics = metrics;
    this.executor.recorder.metrics = metrics;
    this.executor.tracing = JobTracing.active();
    this.listenToPool();
    const { workerId, leaseMs, heartbeatMs } = this.settings;
    const onError = (e: Error) => this.hub.reportError('heartbeat', e);
    const { executions, interrupter } = this.executor;
    const onRenewed = () => this.hub.reportSuccess('heartbeat');
    this.heartbeater = new Heartbeater(this.pool, workerId, leaseMs, heartbeatMs, onError, interrupter, executions, onRenewed);
    this.heartbeater.start();
  }

  private listenToPool(): void {
    if (!this.pool.listeners('error').includes(this.onPoolError)) this.pool.on('error', this.onPoolError);
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
    this.stopPolling();
    await this.ticker.stop();
    const all = Promise.all([...this.executor.executions.values()].map(whenFinished));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      all.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), this.settings.shutdownTimeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (timedOut) await this.executor.interrupter.abandonAll();
    await this.flush();
    await this.registration?.stop();
    this.registration = null;
    this.stopObserving?.();
    this.stopObserving = null;
    await this.stopServices();
    this.lifecycle = 'idle';
    this.stopPromise = null;
    this.hub.emit({ name: 'worker.stopped', workerId: this.workerId });
    this.resolveRun?.();
    this.resolveRun = null;
  }
}

function groupInfo(group: WorkerGroupSettings): WorkerGroupInfo {
  return { name: group.name, queues: [...group.queues], concurrency: group.concurrency };
}
