import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { Subject, type Observable } from 'rxjs';
import type { WorkerEvent } from '../core/events';
import { Queue } from '../core/queue';
import { Worker, type WorkerOptions } from '../core/worker';
import type { WorkhorseModuleOptions } from './workhorse-module-options.interface';
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
  /** Queues to claim from besides the handlers' own (default: the configured worker's `queues`). */
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
 * nothing: a web-only process enqueues but never claims.
 *
 * `events$` streams every worker event (the core `WorkerEvent` union); filter it with
 * `ofWorkhorseEvent(...)`. It completes when the application shuts down.
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

  /** Every event of this process's worker (and of `runOnce` passes), as the core emits them. */
  readonly events$: Observable<WorkerEvent> = this.events.asObservable();

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

  /** The queues the worker claims from (empty when it does not run). */
  get queues(): readonly string[] {
    return this.worker?.queues ?? [];
  }

  /** Handlers running now. */
  get activeCount(): number {
    return this.worker?.activeCount ?? 0;
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
    if (!this.options.worker) return;
    const worker = this.createWorker(this.options.worker);
    if (this.registry.handlers.length === 0) this.logger.warn(messages.workerWithoutHandlers(worker.queues));
    this.worker = worker;
    this.running = worker.run().catch((error: unknown) => this.logger.error(messages.workerCrashed(error)));
  }

  async beforeApplicationShutdown(): Promise<void> {
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
    const configured = this.options.worker || {};
    // Its own id, as it may run beside this process's worker and leases name their owner; no LISTEN
    // connection for a single pass; and an abort stops it at once.
    const worker = this.createWorker({
      ...configured,
      queues: options.queues ?? configured.queues,
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
    }
  }

  /** A core worker over the discovered handlers, claiming from the configured queues and the handlers' queues. */
  private createWorker(options: WorkerOptions): Worker {
    const queues = new Set(options.queues ?? []);
    for (const handler of this.registry.handlers) queues.add(handler.queue ?? 'default');
    const worker = new Worker(this.queue, { ...options, queues: queues.size > 0 ? [...queues] : undefined });
    for (const handler of this.registry.handlers) {
      const options = { transactional: handler.transactional, retry: handler.retry };
      if (handler.definition) worker.handle(handler.definition, handler.fn, options);
      else worker.handle(handler.type, handler.fn, options);
    }
    worker.on((event) => this.publish(event));
    return worker;
  }

  private publish(event: WorkerEvent): void {
    this.log(event);
    for (const subscriber of this.registry.subscribersOf(event.name)) {
      const report = (error: unknown) => this.logger.error(messages.subscriberFailed(subscriber.target, event.name, error));
      try {
        const result = subscriber.invoke(event);
        if (result instanceof Promise) result.catch(report);
      } catch (error) {
        report(error);
      }
    }
    this.events.next(event);
  }

  // Problems are logged; successes and claims are not (they would flood the log).
  // While the database is down every tick, claim and reconnect fails: log the first failure of
  // each kind with its stack, then at most one line per kind every 30 s with the count since.
  private readonly errorLog = new Map<string, { lastAt: number; suppressed: number }>();

  private logError(during: string, error: Error): void {
    const now = Date.now();
    const seen = this.errorLog.get(during);
    if (seen && now - seen.lastAt < 30_000) {
      seen.suppressed++;
      return;
    }
    const suppressed = seen?.suppressed ?? 0;
    this.errorLog.set(during, { lastAt: now, suppressed: 0 });
    const message = messages.workerError(during, error);
    this.logger.error(suppressed > 0 ? `${message} (${suppressed} more since the last report)` : message, seen ? undefined : error.stack);
  }

  private log(event: WorkerEvent): void {
    switch (event.name) {
      case 'worker.started':
        this.logger.log(messages.workerStarted(event.workerId, event.queues, event.concurrency));
        break;
      case 'worker.stopped':
        this.logger.log(messages.workerStopped(event.workerId));
        break;
      case 'worker.error':
        this.logError(event.during, event.error);
        break;
      case 'job.retry_scheduled':
        this.logger.warn(messages.jobRetry(event.jobId, event.type, event.attempt, event.error, event.runAt));
        break;
      case 'job.failed':
        this.logger.warn(messages.jobFailed(event.jobId, event.type, event.attempt, event.error));
        break;
      case 'job.canceled':
        this.logger.log(messages.jobCanceled(event.jobId, event.type));
        break;
      case 'job.lease_lost':
        this.logger.warn(messages.jobLeaseLost(event.jobId, event.type));
        break;
      case 'job.released':
        this.logger.warn(messages.jobReleased(event.jobId, event.type, event.reason));
        break;
      case 'job.abandoned':
        this.logger.warn(messages.jobAbandoned(event.jobId, event.type));
        break;
      case 'job.claimed':
      case 'job.succeeded':
      case 'job.sleeping':
        break;
      default: {
        // A new event in the core union must get a log level here.
        const unhandled: never = event;
        void unhandled;
      }
    }
  }
}
