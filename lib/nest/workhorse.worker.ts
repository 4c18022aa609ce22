import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { Observable, Subject } from 'rxjs';
import type { WorkerEvent, WorkerEventName } from '../core/events';
import { Queue } from '../core/queue';
import { activeMeter } from '../core/telemetry/job-metrics';
import { observeQueueDepth } from '../core/telemetry/queue-depth';
import { Worker, type WorkerGroupStatus, type WorkerOptions } from '../core/worker';
import { EventLog } from '../core/worker/event-log';
import type { WorkhorseModuleOptions, WorkhorseWorkerGroupOptions, WorkhorseWorkerOptions } from './workhorse-module-options.interface';
import { WORKHORSE_MODULE_OPTIONS } from './workhorse.module-definition';
import { WorkhorseRegistry } from './workhorse.registry';
import { WorkhorseScheduler } from './workhorse.scheduler';
import { messages } from './workhorse.messages';

/**
 * Options of {@link WorkhorseWorker.runOnce}.
 *
 * @example
 * const claimed = await worker.runOnce({ queues: ['reports'], signal: AbortSignal.timeout(30_000) });
 */
export interface RunOnceOptions {
  /**
   * Queues to claim from besides the handlers' own (default: the configured worker's queues, all
   * its groups'). A pass claims up to the configured worker's concurrency (every group's added
   * up) from all of them at once: it drains, it does not isolate.
   */
  queues?: string[];
  /**
   * Aborting it stops the pass at once: running handlers see their `ctx.signal` abort, nothing
   * is recorded for them, and their jobs run again after their leases expire.
   */
  signal?: AbortSignal;
}

/**
 * This process's worker, run by the application lifecycle. When the module has `worker`
 * options it starts claiming on application bootstrap (after every module is initialised),
 * and on shutdown it stops claiming and lets running handlers finish (bounded by
 * `shutdownTimeoutMs`) before the module closes its pool. Without `worker` options it does
 * nothing: a web-only process enqueues but never claims (it reports the queue depth of every
 * queue, though, with `metrics: { queueDepth: 'all' }`). With a list of groups, it runs one
 * core worker whose slots are split between them (`groups`); every job event names its `group`.
 *
 * `events$` streams every worker event (the core `WorkerEvent` union); filter it with
 * `ofWorkhorseEvent(...)`. It completes when the application shuts down.
 *
 * The core worker builds an event only when someone wants it, and the per-job ones cost CPU
 * for every job: so this service asks its core worker for the events it logs, those that
 * `@OnWorkhorseEvent` methods declare, and every event only while `events$` has a subscriber.
 *
 * @example
 * @Injectable()
 * export class QueueMetrics implements OnModuleInit {
 *   constructor(private readonly worker: WorkhorseWorker) {}
 *
 *   onModuleInit(): void {
 *     this.worker.events$
 *       .pipe(ofWorkhorseEvent('job.succeeded'))
 *       .subscribe((event) => histogram.observe({ type: event.type }, event.durationMs));
 *   }
 * }
 */
@Injectable()
export class WorkhorseWorker implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Workhorse');
  private readonly events = new Subject<WorkerEvent>();
  private worker: Worker | null = null;
  private running: Promise<void> | null = null;
  /** Stops the queue depth gauge of a process without a worker (`metrics.queueDepth: 'all'`). */
  private stopObserving: (() => void) | null = null;
  /** Subscribers of events$ now. */
  private streamed = 0;
  /** The core workers alive now (this process's and runOnce passes'), each with its unsubscribe function. */
  private readonly listening = new Map<Worker, () => void>();

  /**
   * Every event of this process's worker (and of `runOnce` passes), as the core emits them,
   * while subscribed (the core worker builds the per-job events only then).
   */
  readonly events$: Observable<WorkerEvent> = new Observable<WorkerEvent>((subscriber) => {
    const subscription = this.events.subscribe(subscriber);
    this.streamed++;
    if (this.streamed === 1) this.listenAgain();
    return () => {
      subscription.unsubscribe();
      this.streamed--;
      if (this.streamed === 0) this.listenAgain();
    };
  });

  constructor(
    @Inject(WORKHORSE_MODULE_OPTIONS) private readonly options: WorkhorseModuleOptions,
    private readonly queue: Queue,
    private readonly registry: WorkhorseRegistry,
    private readonly scheduler: WorkhorseScheduler,
  ) {}

  /** True when the module options configure a worker for this process. */
  get isEnabled(): boolean {
    return Boolean(this.options.worker);
  }

  /** True from bootstrap until shutdown begins: the worker claims jobs (unless paused). */
  get isRunning(): boolean {
    return this.worker?.isRunning ?? false;
  }

  /** The queues the worker claims from, every group's (empty when it does not run). */
  get queues(): readonly string[] {
    return this.worker?.queues ?? [];
  }

  /** The worker's groups, with the jobs each executes now (empty when it does not run). */
  get groups(): WorkerGroupStatus[] {
    return this.worker?.groups ?? [];
  }

  /** Jobs the worker executes now (each holds a slot). */
  get activeCount(): number {
    return this.worker?.activeCount ?? 0;
  }

  /** Handlers the worker abandoned (see `abandonAfterMs`) that are still running. */
  get abandonedCount(): number {
    return this.worker?.abandonedCount ?? 0;
  }

  /** Stops claiming new jobs; running handlers go on. Does nothing without a worker. */
  pause(): void {
    this.worker?.pause();
  }

  /** Claims again after {@link pause}. */
  resume(): void {
    this.worker?.resume();
  }

  /** Syncs the application's schedules (see `WorkhorseScheduler`), then starts the worker if configured. */
  async onApplicationBootstrap(): Promise<void> {
    await this.scheduler.syncOnBootstrap();
    if (!this.options.worker) {
      this.observeWithoutWorker();
      return;
    }
    const worker = this.createWorker({ ...workerOptionsOf(this.options.worker), metrics: this.options.metrics });
    if (this.registry.handlers.length === 0) this.logger.warn(messages.workerWithoutHandlers(worker.queues));
    const unserved = [...new Set(this.registry.handlers.map((handler) => handler.queue ?? 'default'))].filter((q) => !worker.queues.includes(q));
    if (unserved.length > 0) this.logger.warn(messages.queuesOfNoGroup(unserved));
    this.worker = worker;
    this.running = worker
      .run()
      .catch((error: unknown) => this.logger.error(messages.workerCrashed(error)))
      .finally(() => this.stopListening(worker));
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopObserving?.();
    this.stopObserving = null;
    if (this.worker) {
      await this.worker.stop();
      await this.running;
    }
    this.events.complete();
  }

  /**
   * One pass with a temporary worker over the discovered handlers: a maintenance tick, one
   * claim of up to `concurrency` jobs, and those jobs run to the end. Resolves with how many
   * jobs it claimed. For scripts and tests, typically in a process without a running worker
   * (see `drainWorkhorse` in `nestjs-workhorse/testing`); its events go to `events$` too.
   */
  async runOnce(options: RunOnceOptions = {}): Promise<number> {
    const { groups, ...configured } = this.options.worker ? workerOptionsOf(this.options.worker) : {};
    // Its own id, as it may run beside this process's worker and leases name their owner; no LISTEN
    // connection for a single pass; and an abort stops it at once.
    const worker = this.createWorker({
      ...configured,
      queues: options.queues ?? (groups ? groups.flatMap((group) => group.queues) : configured.queues),
      concurrency: groups ? Math.min(1000, groups.reduce((sum, group) => sum + (group.concurrency ?? 10), 0)) : configured.concurrency,
      listen: false,
      workerId: undefined,
      shutdownTimeoutMs: 0,
    });
    const { signal } = options;
    if (signal?.aborted) return 0;
    const abort = () => void worker.stop();
    signal?.addEventListener('abort', abort, { once: true });
    try {
      return await worker.runOnce();
    } finally {
      signal?.removeEventListener('abort', abort);
      this.stopListening(worker);
    }
  }

  /**
   * A core worker over the discovered handlers. Without groups it claims from the configured
   * queues and the handlers' queues; each group claims exactly its own.
   */
  private createWorker(options: WorkerOptions): Worker {
    let worker: Worker;
    if (options.groups) {
      worker = new Worker(this.queue, options);
    } else {
      const queues = new Set(options.queues ?? []);
      for (const handler of this.registry.handlers) queues.add(handler.queue ?? 'default');
      worker = new Worker(this.queue, { ...options, queues: queues.size > 0 ? [...queues] : undefined });
    }
    for (const handler of this.registry.handlers) {
      const options = { transactional: handler.transactional, retry: handler.retry };
      if (handler.definition) worker.handle(handler.definition, handler.fn, options);
      else worker.handle(handler.type, handler.fn, options);
    }
    this.listen(worker);
    return worker;
  }

  /** `metrics.queueDepth: 'all'` in a process without a worker: the gauge of every queue, with an SDK. */
  private observeWithoutWorker(): void {
    const meter = this.options.metrics?.queueDepth === 'all' ? activeMeter() : null;
    if (meter) this.stopObserving = observeQueueDepth(meter, this.queue.pool, [], true);
  }

  /** Subscribes to the worker's events that someone here wants now (see the class comment). */
  private listen(worker: Worker): void {
    const publish = (event: WorkerEvent) => this.publish(event);
    const names = this.streamed > 0 ? null : [...new Set([...this.logged, ...this.registry.subscribedEvents])];
    this.listening.set(worker, names === null ? worker.on(publish) : worker.on(names, publish));
  }

  /** events$ gained its first subscriber or lost its last: every worker's subscription changes. */
  private listenAgain(): void {
    for (const [worker, unsubscribe] of this.listening) {
      unsubscribe();
      this.listen(worker);
    }
  }

  private stopListening(worker: Worker): void {
    this.listening.get(worker)?.();
    this.listening.delete(worker);
  }

  private publish(event: WorkerEvent): void {
    this.eventLog.write(event);
    for (const subscriber of this.registry.subscribersOf(event.name)) {
      const report = (error: unknown) => this.logger.error(messages.subscriberFailed(subscriber.target, event.name, error));
      try {
        const result = subscriber.invoke(event);
        if (result instanceof Promise) result.catch(report);
      } catch (error) {
        report(error);
      }
    }
    if (this.streamed > 0) this.events.next(event);
  }

  // Problems, start, stop, drains and cancellations are logged through Nest's Logger (the core's EventLog).
  private readonly eventLog = new EventLog(this.logger);
  private readonly logged: readonly WorkerEventName[] = this.eventLog.names;
}

/** The module's `worker` option as core options: a list of groups is `{ groups }`. */
function workerOptionsOf(worker: WorkhorseWorkerOptions | WorkhorseWorkerGroupOptions[]): WorkhorseWorkerOptions {
  return Array.isArray(worker) ? { groups: worker } : worker;
}
