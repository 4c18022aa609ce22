import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { HandlerContext } from '../context';
import { WorkhorseValidationError } from '../errors';
import type { RetryPolicy } from '../types';
import { heartbeatNotBelowLease, PROTOCOL_LIMITS } from '../limits';
import { checkInteger, checkName, checkRetryPolicy, checkText } from '../validation';
import type { WorkhorseLogger } from './event-log';

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

/**
 * One group of a worker's slots (`groups`): its own queues and its own concurrency, so a flood
 * in one group never takes the slots of another.
 *
 * @example
 * const groups: WorkerGroupOptions[] = [{ queues: ['emails'], concurrency: 50 }, { name: 'reports', queues: ['reports'], concurrency: 2 }];
 * new Worker(queue, { groups });
 */
export interface WorkerGroupOptions {
  /**
   * Names the group in its jobs' events (`group`). Default: its queues joined by commas
   * (`emails`, `emails,sms`).
   */
  name?: string;
  /** Queues the group claims from (1 to 100); a queue belongs to one group of a worker. */
  queues: string[];
  /** Handlers of the group running at once, 1 to 1000, default 10. */
  concurrency?: number;
  /** Claim-and-complete round trips of the group in flight at once, 1 to 4, default 1 (see `WorkerOptions.roundTrips`). */
  roundTrips?: number;
}

/**
 * How much of the system a worker's `workhorse.queue.depth` gauge describes: `'own'` (default)
 * its own queues, `'all'` those and every other queue of the database (one process of the
 * deployment should, so that a queue no worker serves shows up), `false` none. `'own'` and
 * `'all'` read `list_queues_v1`, which needs the operator capability.
 */
export type QueueDepthScope = 'own' | 'all' | false;

/** What a worker reports as metrics besides its jobs' (see docs/operations.md#metrics). */
export interface WorkerMetricsOptions {
  /** The queues of the `workhorse.queue.depth` gauge, default `'own'`. */
  queueDepth?: QueueDepthScope;
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
  /** Heartbeat interval in ms, below `leaseMs`; default a third of the lease. */
  heartbeatMs?: number;
  /** Poll interval in ms when no notification arrives, default 1000 (jittered, backing off to 5x while idle). */
  pollMs?: number;
  /** Maintenance (promotion, recovery) interval in ms, default 1000. */
  tickMs?: number;
  /** How long `stop()` lets running handlers finish before abandoning them, default 25 000 ms. */
  shutdownTimeoutMs?: number;
  /**
   * How long a handler may go on after its attempt is over (its execution timeout passed, its
   * job was canceled, its lease was lost: its `ctx.signal` aborted) before the worker abandons
   * it and frees its slot, default 10 000 ms (0 to 3 600 000). A handler that ignores its signal
   * then no longer holds a slot; see `job.abandoned` and `abandonedCount`.
   */
  abandonAfterMs?: number;
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
  /**
   * Where the worker logs problems, start, stop, drains and cancellations (`console` will do);
   * default none (events only). The Nest module logs through Nest's `Logger` without it. Every
   * line about a job names its id, type and attempt; see docs/operations.md#logs for the levels.
   */
  logger?: WorkhorseLogger;
  /**
   * Groups of slots, each with its own queues and concurrency, in place of `queues`,
   * `concurrency` and `roundTrips` (1 to 20 groups). The groups share everything else: the pool,
   * leases and heartbeats, LISTEN, maintenance, the registry row and shutdown. See
   * docs/workers.md#worker-groups.
   */
  groups?: WorkerGroupOptions[];
  /** Metrics besides the jobs' (the queue depth gauge's scope). */
  metrics?: WorkerMetricsOptions;
}

/** A {@link WorkerGroupOptions} once checked, with its name and defaults filled in. */
export interface WorkerGroupSettings {
  readonly name: string;
  readonly queues: readonly string[];
  readonly concurrency: number;
  readonly roundTrips: number;
}

/** {@link WorkerOptions} once checked, with every default filled in. */
export interface WorkerSettings {
  /** Every group's queues. */
  readonly queues: readonly string[];
  /** Every group's concurrency, added up. */
  readonly concurrency: number;
  /** The groups (one, named after its queues, when the options give none). */
  readonly groups: readonly WorkerGroupSettings[];
  readonly leaseMs: number;
  readonly heartbeatMs: number;
  readonly pollMs: number;
  readonly tickMs: number;
  readonly shutdownTimeoutMs: number;
  readonly abandonAfterMs: number;
  readonly listen: boolean | { readonly connectionString: string };
  readonly workerId: string;
  readonly unknownTypeDelayMs: number;
  readonly logger: WorkhorseLogger | null;
  readonly queueDepth: QueueDepthScope;
}

/** {@link HandlerOptions} once checked. */
export interface HandlerSettings {
  readonly transactional: boolean;
  readonly retry: RetryPolicy | undefined;
}

const WORKER_OPTION_KEYS = [
  'queues',
  'concurrency',
  'roundTrips',
  'leaseMs',
  'heartbeatMs',
  'pollMs',
  'tickMs',
  'shutdownTimeoutMs',
  'abandonAfterMs',
  'listen',
  'workerId',
  'unknownTypeDelayMs',
  'logger',
  'groups',
  'metrics',
] as const satisfies readonly (keyof WorkerOptions)[];

const GROUP_OPTION_KEYS = ['name', 'queues', 'concurrency', 'roundTrips'] as const satisfies readonly (keyof WorkerGroupOptions)[];

// Fails to compile (naming the missing option) when WorkerOptions gains an option the list misses.
type MissingOption = Exclude<keyof WorkerOptions, (typeof WORKER_OPTION_KEYS)[number]>;
const everyOptionListed: [MissingOption] extends [never] ? true : MissingOption = true;
void everyOptionListed;

const HANDLER_OPTION_KEYS = ['transactional', 'retry'] as const satisfies readonly (keyof HandlerOptions)[];

function fail(field: string, message: string): never {
  throw new WorkhorseValidationError(field, message);
}

function checkKeys(options: unknown, known: readonly string[], what: string, path = ''): Record<string, unknown> {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) fail(path === '' ? 'options' : path.slice(0, -1), 'must be an object');
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) fail(`${path}${key}`, `is not a ${what} option (${known.join(', ')})`);
  }
  return options as Record<string, unknown>;
}

/**
 * Checks worker options and fills in their defaults: the one set of rules for the core
 * `Worker` and the Nest module's `worker` option alike. Throws a
 * {@link WorkhorseValidationError} naming the first bad field.
 *
 * @example
 * const settings = checkWorkerOptions({ concurrency: 20 }); // settings.leaseMs === 30_000
 */
export function checkWorkerOptions(options: unknown = {}): WorkerSettings {
  const o = checkKeys(options, WORKER_OPTION_KEYS, 'worker');
  const groups = o.groups === undefined ? [checkGroup(o, '', false)] : checkGroups(o);
  const queues = groups.flatMap((group) => group.queues);
  if (queues.length > PROTOCOL_LIMITS.worker.queues.max) fail('groups', `must list at most ${PROTOCOL_LIMITS.worker.queues.max} queues in all`);
  const w = PROTOCOL_LIMITS.worker;
  const ranged = (key: 'leaseMs' | 'pollMs' | 'tickMs' | 'shutdownTimeoutMs' | 'unknownTypeDelayMs') =>
    checkInteger(o[key] ?? w[key].default, key, w[key].min, w[key].max);
  const leaseMs = ranged('leaseMs');
  const heartbeatMs = checkInteger(o.heartbeatMs ?? Math.floor(leaseMs / w.heartbeatMs.defaultLeaseDivisor), 'heartbeatMs', w.heartbeatMs.min, w.heartbeatMs.max);
  // A lease renewed no more often than it lasts lapses between two renewals: every job would be
  // given up (and run again elsewhere) however healthy the worker. (Every SDK refuses it alike.)
  if (w.heartbeatMs.belowLeaseMs && heartbeatMs >= leaseMs) fail('heartbeatMs', heartbeatNotBelowLease(leaseMs));
  const listen = checkListen(o.listen ?? true);
  // Every statement of the worker carries its id: one the database cannot store fails them all.
  const workerId = checkText(o.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`, 'workerId', w.workerIdLength.min, w.workerIdLength.max);
  return {
    queues,
    concurrency: groups.reduce((sum, group) => sum + group.concurrency, 0),
    groups,
    leaseMs,
    heartbeatMs,
    pollMs: ranged('pollMs'),
    tickMs: ranged('tickMs'),
    shutdownTimeoutMs: ranged('shutdownTimeoutMs'),
    abandonAfterMs: checkInteger(o.abandonAfterMs ?? 10_000, 'abandonAfterMs', 0, 3_600_000),
    listen,
    workerId,
    unknownTypeDelayMs: ranged('unknownTypeDelayMs'),
    logger: checkLogger(o.logger),
    queueDepth: checkMetricsOptions(o.metrics),
  };
}

// The fields of one group, at `path` (`groups[1].` or, for the options without groups, ''). A
// group needs its queues; the options without groups default to ['default'].
function checkGroup(o: Record<string, unknown>, path: string, named: boolean): WorkerGroupSettings {
  const list = o.queues ?? (named ? undefined : ['default']);
  const w = PROTOCOL_LIMITS.worker;
  if (!Array.isArray(list) || list.length < w.queues.min || list.length > w.queues.max) fail(`${path}queues`, `must list ${w.queues.min} to ${w.queues.max} queue names`);
  const queues = [...new Set(list.map((q: unknown, i) => checkName(q, `${path}queues[${i}]`)))];
  const concurrency = checkInteger(o.concurrency ?? w.concurrency.default, `${path}concurrency`, w.concurrency.min, w.concurrency.max);
  const roundTrips = checkInteger(o.roundTrips ?? w.roundTrips.default, `${path}roundTrips`, w.roundTrips.min, w.roundTrips.max);
  if (roundTrips > concurrency) fail(`${path}roundTrips`, `must be at most concurrency (${concurrency})`);
  const name = named && o.name !== undefined ? checkName(o.name, `${path}name`) : queues.join(',');
  return { name, queues, concurrency, roundTrips };
}

// A queue in two groups would give its jobs to whichever group claims first, so neither group's
// concurrency would bound them: each queue belongs to one group, and each group has its own name.
function checkGroups(o: Record<string, unknown>): WorkerGroupSettings[] {
  for (const key of ['queues', 'concurrency', 'roundTrips'] as const) {
    if (o[key] !== undefined) fail(key, 'cannot be given with groups: give it to each group');
  }
  const list = o.groups;
  if (!Array.isArray(list) || list.length === 0 || list.length > 20) fail('groups', 'must list 1 to 20 groups');
  const groupOf = new Map<string, string>();
  const names = new Set<string>();
  return list.map((entry: unknown, i) => {
    const path = `groups[${i}].`;
    const group = checkGroup(checkKeys(entry, GROUP_OPTION_KEYS, 'worker group', path), path, true);
    for (const queue of group.queues) {
      const other = groupOf.get(queue);
      if (other !== undefined) fail(`${path}queues`, `lists "${queue}", which group "${other}" claims already: a queue belongs to one group`);
      groupOf.set(queue, group.name);
    }
    if (names.has(group.name)) fail(`${path}name`, `"${group.name}" names another group already: give each group its own name`);
    names.add(group.name);
    return group;
  });
}

/**
 * Checks the `metrics` option (of a worker, or of the Nest module) and returns the queue depth
 * gauge's scope. Throws a {@link WorkhorseValidationError} naming the bad field.
 */
export function checkMetricsOptions(metrics: unknown): QueueDepthScope {
  if (metrics === undefined) return 'own';
  const o = checkKeys(metrics, ['queueDepth'], 'metrics', 'metrics.');
  const scope = o.queueDepth ?? 'own';
  if (scope !== 'own' && scope !== 'all' && scope !== false) fail('metrics.queueDepth', "must be 'own', 'all' or false");
  return scope;
}

function checkLogger(logger: unknown): WorkhorseLogger | null {
  if (logger === undefined) return null;
  const methods = logger as Partial<Record<keyof WorkhorseLogger, unknown>> | null;
  if (typeof methods !== 'object' || methods === null || (['log', 'warn', 'error'] as const).some((m) => typeof methods[m] !== 'function')) {
    fail('logger', 'must have log, warn and error methods (console, or Nest\'s Logger, will do)');
  }
  return logger as WorkhorseLogger;
}

function checkListen(listen: unknown): WorkerSettings['listen'] {
  if (typeof listen === 'boolean') return listen;
  const direct = listen as { connectionString?: unknown } | null;
  if (
    typeof direct !== 'object' ||
    direct === null ||
    Object.keys(direct).some((key) => key !== 'connectionString') ||
    typeof direct.connectionString !== 'string' ||
    direct.connectionString.length === 0
  ) {
    fail('listen', 'must be true, false or { connectionString } of a direct connection');
  }
  return { connectionString: direct.connectionString };
}

/**
 * Checks the options of one handler: the rules of `worker.handle` and of the Nest
 * `@JobHandler` decorator, which also accepts its own `moreKeys` (`queue`) and checks them
 * itself. Throws a {@link WorkhorseValidationError} naming the first bad field.
 */
export function checkHandlerOptions(options: unknown = {}, moreKeys: readonly string[] = []): HandlerSettings {
  const o = checkKeys(options, [...moreKeys, ...HANDLER_OPTION_KEYS], 'handler');
  if (o.transactional !== undefined && typeof o.transactional !== 'boolean') fail('transactional', 'must be true or false');
  return {
    transactional: o.transactional === true,
    retry: o.retry === undefined ? undefined : checkRetryPolicy(o.retry, 'retry'),
  };
}

/** A registered handler. */
export interface Handler {
  fn: JobHandlerFn<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  settings: HandlerSettings;
}
