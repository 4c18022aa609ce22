import type { ScheduleDefinition } from '../core/schedules/types';
import type { TransactionSource } from '../core/transaction-scope';
import type { QueuePolicy, RetryPolicy } from '../core/types';
import type { Pool, PoolConfig } from 'pg';
import type { WorkerGroupOptions, WorkerMetricsOptions, WorkerOptions } from '../core/worker';

/**
 * Options of this process's worker: the core `WorkerOptions`, but for `metrics` (an option of
 * the module here, as a process without a worker may report them). Without `groups`, `queues`
 * is merged with the queues that the discovered `@JobHandler`s declare; each group claims
 * exactly its own queues.
 *
 * @example
 * const worker: WorkhorseWorkerOptions = { concurrency: 20, leaseMs: 60_000, shutdownTimeoutMs: 20_000 };
 * WorkhorseModule.forRoot({ connectionString: process.env.DATABASE_URL, worker });
 */
export type WorkhorseWorkerOptions = Omit<WorkerOptions, 'metrics'>;

/**
 * One group of this process's worker (the list form of `worker`): its queues and its
 * concurrency, so that a flood in one group never takes the slots of another.
 *
 * @example
 * const worker: WorkhorseWorkerGroupOptions[] = [{ queues: ['emails'], concurrency: 50 }, { queues: ['reports'], concurrency: 2 }];
 * WorkhorseModule.forRoot({ connectionString: process.env.DATABASE_URL, worker });
 */
export type WorkhorseWorkerGroupOptions = WorkerGroupOptions;

/**
 * Metrics besides the jobs' (with an OpenTelemetry SDK registered): `queueDepth` is the scope of
 * the `workhorse.queue.depth` gauge, `'own'` (default: the worker's queues; nothing in a process
 * without a worker), `'all'` (every queue of the database, from one process of the deployment)
 * or `false`. See docs/operations.md#metrics.
 *
 * @example
 * WorkhorseModule.forRoot({ connectionString: process.env.DATABASE_URL, metrics: { queueDepth: 'all' } });
 */
export type WorkhorseMetricsOptions = WorkerMetricsOptions;

/**
 * Options of `WorkhorseModule.forRoot` (and what a `forRootAsync` factory returns).
 *
 * @example
 * WorkhorseModule.forRoot({
 *   connectionString: process.env.DATABASE_URL,
 *   poolConfig: { max: 20 },
 *   schema: 'verify',
 *   worker: { concurrency: 10, shutdownTimeoutMs: 20_000 },
 *   requestTransactions: true,
 * });
 */
export interface WorkhorseModuleOptions {
  /**
   * The database to connect to. The module creates a pool for it and closes that pool when the
   * application shuts down. Give either this or `pool`.
   */
  connectionString?: string;
  /** An existing pool to use instead. The module never closes a pool it was given. */
  pool?: Pool;
  /** Settings of the pool the module creates (with `connectionString` only), e.g. `{ max: 20 }`. */
  poolConfig?: Omit<PoolConfig, 'connectionString'>;
  /**
   * `'install'` (default): install the `workhorse` schema at start-up if it is absent, and
   * migrate it if it is older than this package's (`installSchema`; the pool's role must own
   * the schema). `'verify'`: change nothing, and refuse to start unless the installed schema is
   * one this package works with, `MIN_SCHEMA_VERSION` to `SCHEMA_VERSION` (for deployments that
   * migrate separately, with `workhorse schema migrate`).
   */
  schema?: 'install' | 'verify';
  /**
   * Worker settings. Absent or `false`: this process runs no worker (a web-only process still
   * enqueues). An object (even `{}`) starts a worker on application bootstrap; a list of groups
   * (`[{ queues: ['emails'], concurrency: 50 }, { queues: ['reports'], concurrency: 2 }]`, the
   * same as `{ groups: [...] }`) starts one whose slots are split between them.
   */
  worker?: WorkhorseWorkerOptions | WorkhorseWorkerGroupOptions[] | false;
  /** Metrics besides the jobs' (the queue depth gauge's scope); see {@link WorkhorseMetricsOptions}. */
  metrics?: WorkhorseMetricsOptions;
  /** Give every HTTP request its own transaction (see `WorkhorseTransactionInterceptor`). Default false. */
  requestTransactions?: boolean;
  /**
   * Where your ORM's current transaction is: while it reports one, the injected `Queue` and
   * `Admin` (and `WorkhorseTransactionHost.client`) join it when the caller passes no client,
   * before any transaction of the host itself. Give the scope of your ORM's entry point
   * (`typeormTransactionScope(dataSource)`, `prismaTransactionScope(prisma)`, ...) or, with
   * `@nestjs-cls/transactional`, `clsTransactionSource(txHost, fromTypeOrm)`. Its database must
   * be the module's. Default: none.
   */
  transaction?: TransactionSource;
  /**
   * Refuse an enqueue of the injected `Queue` (`enqueue`, `enqueueMany`) that runs outside any
   * transaction (no client argument, none of the `transaction` option, none of the host), with a
   * `TransactionRequiredError` before anything is written. That is what an enqueue inside a
   * transaction your ORM opened itself (`dataSource.transaction(cb)`) looks like: without this
   * option it would commit on the pool and stay when the ORM's transaction rolls back. Pass the
   * pool as the client to enqueue on its own on purpose. Default false; then, in development
   * (`NODE_ENV` not `production`) with a `transaction` option and no `requestTransactions`, such
   * an enqueue is logged as a warning, once per call site.
   */
  requireTransaction?: boolean;
  /**
   * Flow control per queue, by queue name: `{ billing: { concurrency: 5 }, emails: { rateLimit:
   * { limit: 50, intervalMs: 1000 } } }`. Applied at start-up, before anything that injects the
   * module runs, with `Admin.setQueuePolicy`: each named queue gets exactly this policy (a limit
   * left out is removed); queues not named keep theirs. Needs the operator capability. See
   * docs/workers.md, "Flow control".
   */
  queues?: Record<string, QueuePolicy>;
  /**
   * Schedules besides those declared on `@JobHandler`s (`{ key, type, cron, ... }`, as
   * `queue.syncSchedules` takes them). See `syncSchedules` for when they are synced.
   */
  schedules?: ScheduleDefinition[];
  /** The namespace this application's schedules are synced into. Default `default`. */
  scheduleNamespace?: string;
  /**
   * Whether this process makes its schedules (`schedules` and those of `@JobHandler`s) the
   * desired state of `scheduleNamespace` on application bootstrap: keys it no longer declares
   * are disabled. Default: when the process runs a worker and declares at least one schedule.
   * `true` also syncs from a web-only process, and syncs an empty set (disabling every
   * schedule of the namespace); `false` never syncs.
   */
  syncSchedules?: boolean;
}

/**
 * Per-handler options of `@JobHandler(type, options)`.
 *
 * @example
 * @JobHandler('invoice.book', { queue: 'billing', transactional: true })
 * async book(payload: { invoiceId: string }): Promise<void> { ... }
 */
/**
 * A schedule of `@JobHandler(type, { schedule })`: the handler's type and queue are the job's.
 *
 * @example
 * @JobHandler('report.daily', { schedule: { cron: '0 6 * * *', timezone: 'Europe/Berlin', payload: { format: 'pdf' } } })
 * async report(payload: { format: string }): Promise<void> { ... }
 */
export interface JobHandlerSchedule extends Omit<ScheduleDefinition, 'key' | 'type'> {
  /** The schedule's key in its namespace. Default: the job type (give one to each of several schedules). */
  key?: string;
}

export interface JobHandlerOptions {
  /**
   * The queue this job type lives in. The worker claims from it, and the Nest `Queue` enqueues
   * jobs of this type into it when the caller names no queue. Default `default`.
   */
  queue?: string;
  /**
   * Run the handler in the transaction that also records the job's completion: writes made
   * through `WorkhorseTransactionHost`, `Queue` and `Admin` inside it commit exactly when the
   * job succeeds and roll back when it throws. Default false.
   */
  transactional?: boolean;
  /**
   * Retry policy for jobs of this type that were enqueued without one of their own (the job's
   * policy wins; without either the default applies).
   */
  retry?: RetryPolicy;
  /**
   * Enqueue a job of this type on a cron schedule (or several): synced at bootstrap into the
   * module's `scheduleNamespace` and fired by the workers' maintenance ticks, once per
   * occurrence. See docs/schedules.md.
   */
  schedule?: JobHandlerSchedule | JobHandlerSchedule[];
}
