/**
 * Every message the Nest integration and the testing helpers show to users: errors, warnings
 * and log lines. Each error says what is wrong and what to do about it.
 */
import type { ErrorEnvelope, JobSnapshot, JobState } from '../core/types';

const MODULE = 'WorkhorseModule';

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value);
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

function errorText(error: ErrorEnvelope | null): string {
  return error ? `${error.name}: ${error.message}` : 'none';
}

export const messages = {
  // ---- module options ---------------------------------------------------------------------------
  optionsNotObject: (value: unknown) =>
    `${MODULE} options must be an object such as { connectionString: process.env.DATABASE_URL }, got ${describe(value)}. ` +
    'With forRootAsync, check that the factory returns the options.',
  unknownOption: (key: string, known: readonly string[]) =>
    `${MODULE}: "${key}" is not an option (${known.join(', ')}). Check its spelling; worker settings go under "worker".`,
  noDatabase: () =>
    `${MODULE} needs a database: give connectionString (the module creates a pool and closes it on shutdown) ` +
    'or pool (an existing pg Pool, which you close yourself).',
  twoDatabases: () =>
    `${MODULE}: give connectionString or pool, not both: with pool the module would ignore connectionString.`,
  badConnectionString: (value: unknown) =>
    `${MODULE}: connectionString must be a non-empty string such as "postgres://user:password@host:5432/db", got ${describe(value)}.`,
  badPool: (value: unknown) =>
    `${MODULE}: pool must be a pg Pool (new Pool({ ... }) from "pg" or "nestjs-workhorse"), got ${describe(value)}.`,
  poolConfigWithPool: () =>
    `${MODULE}: poolConfig configures the pool the module creates from connectionString; with your own pool, configure that pool instead.`,
  badPoolConfig: (value: unknown) =>
    `${MODULE}: poolConfig must be an object of pg PoolConfig settings such as { max: 20 }, got ${describe(value)}.`,
  poolConfigConnectionString: () =>
    `${MODULE}: put the connection string in the connectionString option, not in poolConfig.`,
  badScheduleNamespace: (detail: string) => `${MODULE}: scheduleNamespace ${detail}.`,
  badSchedules: (value: unknown) =>
    `${MODULE}: schedules must be an array of schedule definitions such as [{ key: 'nightly', type: 'report.daily', cron: '0 6 * * *' }], got ${describe(value)}.`,
  badSchedule: (detail: string) => `${MODULE}: schedules: ${detail}`,
  badSyncSchedules: (value: unknown) => `${MODULE}: syncSchedules must be true or false, got ${describe(value)}.`,
  duplicateScheduleKey: (key: string, first: string, second: string) =>
    `Two schedules have the key "${key}" (${first} and ${second}): keys name schedules within their namespace. ` +
    'Give one of them another key.',
  schedulesSynced: (namespace: string, changes: string) => `Synced the schedules of namespace "${namespace}": ${changes}.`,
  undeclaredSchedules: (namespace: string, keys: string[]) =>
    `Namespace "${namespace}" has ${keys.length} active schedule(s) this application does not declare (${keys.join(', ')}); ` +
    'they go on firing. Set syncSchedules: true to disable them, or give this application its own scheduleNamespace.',
  badSchemaMode: (value: unknown) =>
    `${MODULE}: schema must be 'install' (create the schema if it is absent, migrate it if it is older) or 'verify' (only check it), got ${describe(value)}.`,
  badWorker: (value: unknown) =>
    `${MODULE}: worker must be an object of worker settings (even {}) or a list of worker groups ` +
    `([{ queues: ['emails'], concurrency: 50 }, ...]) to run a worker in this process, ` +
    `or false / absent for a process that only enqueues, got ${describe(value)}.`,
  badWorkerOption: (detail: string) => `${MODULE}: worker${detail}`,
  workerMetrics: () =>
    `${MODULE}: metrics is an option of the module, not of the worker (a process without a worker may report them too): ` +
    "forRoot({ metrics: { queueDepth: 'all' }, worker: { ... } }).",
  badMetrics: (detail: string) => `${MODULE}: ${detail}.`,
  badQueues: (value: unknown) =>
    `${MODULE}: queues must be an object of policies by queue name, such as { billing: { concurrency: 5 } }, got ${describe(value)}.`,
  badQueuePolicy: (queue: string, field: string, message: string) => {
    const detail = message.slice(field.length + 2);
    if (field === 'queue') return `${MODULE}: queues: ${JSON.stringify(queue)} is not a queue name (${detail}).`;
    return field === 'policy' ? `${MODULE}: queues.${queue}: ${detail}` : `${MODULE}: queues.${queue}.${field}: ${detail}`;
  },
  queuePoliciesFailed: (detail: string) => `${MODULE} could not set the queue policies of the queues option: ${detail}`,
  badRequestTransactions: (value: unknown) =>
    `${MODULE}: requestTransactions must be true or false, got ${describe(value)}.`,
  badRequireTransaction: (value: unknown) =>
    `${MODULE}: requireTransaction must be true or false, got ${describe(value)}.`,
  badTransactionSource: (value: unknown) =>
    `${MODULE}: transaction must be an object with a current() method that returns the current transaction as a ` +
    `Queryable (e.g. typeormTransactionScope(dataSource) from 'nestjs-workhorse/typeorm', or clsTransactionSource(...) ` +
    `from 'nestjs-workhorse/nestjs-cls'), got ${describe(value)}.`,
  schemaNotInstalled: (detail: string) =>
    `${MODULE} (schema: 'verify') refuses to start: ${detail} ` +
    "Or let this process install the schema with schema: 'install'.",
  schemaMismatch: (mode: string, detail: string) => `${MODULE} (schema: '${mode}') refuses to start: ${detail}`,
  schemaInstalled: (version: number) =>
    `Installed the workhorse schema (version ${version}) in this database: its tables and SQL functions live in the "workhorse" schema.`,
  schemaMigrated: (from: number, to: number, applied: readonly number[]) =>
    `Migrated the workhorse schema from version ${from} to ${to} (step${applied.length === 1 ? '' : 's'} ${applied.join(', ')}); queued jobs, schedules and history are kept.`,
  schemaUnreachable: (mode: string, detail: string) =>
    `${MODULE} could not ${mode} the workhorse schema: ${detail}. Check connectionString / pool and that the database is up.`,

  // ---- decorators and discovery -----------------------------------------------------------------
  notAMethod: (decorator: string, target: string) =>
    `@${decorator}() decorates methods only, but ${target} is not a method.`,
  badHandlerType: (target: string, value: unknown, detail: string) =>
    `@JobHandler on ${target}: the job type (${describe(value)}) ${detail}.`,
  badHandlerOptions: (target: string, value: unknown) =>
    `@JobHandler on ${target}: options must be an object such as { queue: 'emails', transactional: true }, got ${describe(value)}.`,
  badHandlerOption: (target: string, detail: string) => `@JobHandler on ${target}: ${detail}.`,
  badHandlerSchedule: (target: string, index: number, detail: string) => `@JobHandler on ${target}: schedule[${index}] ${detail}.`,
  duplicateHandlerScheduleKey: (target: string, key: string) =>
    `@JobHandler on ${target}: two schedules have the key "${key}" (the job type, unless given): give each schedule its own key.`,
  queueWithDefinition: (target: string, type: string) =>
    `@JobHandler on ${target}: a handler of a job definition takes its queue from the definition; ` +
    `give queue in defineJob('${type}', { queue }) instead of the handler options.`,
  badHandlerQueue: (target: string, value: unknown, detail: string) =>
    `@JobHandler on ${target}: the queue (${describe(value)}) ${detail}.`,
  unknownEvent: (target: string, name: unknown, known: readonly string[]) =>
    `@OnWorkhorseEvent on ${target}: ${describe(name)} is not a worker event (${known.join(', ')}).`,
  duplicateHandler: (type: string, first: string, second: string) =>
    `Two handlers for job type "${type}": ${first} and ${second}. A job type has exactly one handler: ` +
    'remove one, or give one of them another type.',
  scopedHost: (decorator: string, target: string, scope: string) =>
    `@${decorator} on ${target}: the provider is ${scope}, so no single instance of it exists outside a request ` +
    'for the worker to call. Job handlers and event subscribers must live on singleton providers: move the method ' +
    'to a default-scoped provider (it can still start request-independent work), and carry per-job state in the ' +
    'payload and the HandlerContext instead of in request-scoped providers.',
  transactionalWithoutHost: (target: string) =>
    `@Transactional() ${target} found no transaction host: it was called on an object that WorkhorseModule did not ` +
    'set up. Call it on the instance Nest injects (not on one made with `new`, nor on a detached method), after the ' +
    'application has initialised; on request-scoped or transient classes, call it inside a request transaction ' +
    '(requestTransactions: true or WorkhorseTransactionInterceptor), or move it to a singleton provider.',

  // ---- transactions -----------------------------------------------------------------------------
  transactionEnded: () =>
    'This transaction has already ended (committed or rolled back), so it cannot run more queries. A query that ' +
    'runs late usually means a missing `await` (for example on queue.enqueue) inside a transaction.',
  commitRolledBack: () =>
    'The transaction was rolled back instead of committed: a statement inside it failed (and the error was caught), ' +
    'so PostgreSQL discarded all of its writes. Let the error propagate, or use a SAVEPOINT around the statement.',
  transactionConnectionLost: (reason: string) =>
    `The transaction's database connection was lost (${reason}), so PostgreSQL rolled the transaction back and ` +
    'none of its writes were committed. The connection is discarded; run the transaction again.',
  enqueueOutsideTransaction: (method: string, types: string) =>
    `queue.${method}(${types}) ran outside any transaction, and WorkhorseModule has requireTransaction: true, so ` +
    'nothing was written. Inside a transaction your ORM opened itself (dataSource.transaction(cb), prisma.$transaction(cb)) ' +
    'the Queue cannot see it: pass it (queue.enqueue(type, payload, {}, fromTypeOrm(manager)); fromPrisma(tx), ' +
    "fromDrizzle(tx) and fromKysely(trx) likewise), or open it through the scope of the module's transaction option " +
    '(typeormTransactionScope(dataSource).run(cb), or the scope of your ORM). To enqueue on its own on purpose, pass the ' +
    'pool: queue.enqueue(type, payload, {}, queue.pool).',
  enqueueOutsideScope: (method: string, types: string, site: string) =>
    `queue.${method}(${types}) at ${site} ran outside any transaction, so it committed on its own. If it runs inside a ` +
    'transaction your ORM opened itself (dataSource.transaction(cb), prisma.$transaction(cb)), the job is not part ' +
    'of it and stays when it rolls back: pass that transaction (fromTypeOrm(manager), fromPrisma(tx)) or open it through ' +
    "the scope of the module's transaction option. If it is meant to run on its own, pass the pool " +
    '(queue.enqueue(type, payload, {}, queue.pool)), or set requireTransaction: true to refuse such enqueues. ' +
    '(Said once per call site, and not when NODE_ENV is production.)',
  transactionalHandlerWithoutClient: (type: string) =>
    `The transactional handler for "${type}" received no transaction client (ctx.client) from the worker.`,

  // ---- worker logs ------------------------------------------------------------------------------
  workerWithoutHandlers: (queues: readonly string[]) =>
    `The worker found no @JobHandler methods; it will claim jobs from ${queues.join(', ')} only to release them. ` +
    'Add handlers, or set worker: false in a process that should only enqueue.',
  queuesOfNoGroup: (queues: readonly string[]) =>
    `No worker group of this process claims queue(s) ${queues.join(', ')}, which @JobHandler methods declare: ` +
    'their jobs run only where another process serves them. Add the queues to a group if this process should run them.',
  workerCrashed: (error: unknown) => `The worker stopped unexpectedly: ${error instanceof Error ? error.message : String(error)}`,
  subscriberFailed: (target: string, event: string, error: unknown) =>
    `@OnWorkhorseEvent('${event}') ${target} threw: ${error instanceof Error ? error.message : String(error)}. ` +
    'The worker goes on; handle errors inside the subscriber.',

  // ---- testing helpers --------------------------------------------------------------------------
  drainTimeout: (timeoutMs: number, due: readonly JobSnapshot[]) =>
    `drainWorkhorse: work was still due after ${timeoutMs} ms: ` +
    (due.length === 0
      ? 'a handler was still running.'
      : due
          .slice(0, 10)
          .map((job) => `${job.id} (${job.type} on ${job.queue}, ${job.state}, attempt ${job.currentAttempt})`)
          .join('; ') + (due.length > 10 ? `; and ${due.length - 10} more.` : '.')) +
    ' A handler that never returns, or jobs enqueued as fast as they run, keep a queue busy.',
  jobNotFound: (jobId: string) => `waitForJobState: no job ${jobId} exists (was its transaction rolled back?).`,
  jobStateTimeout: (jobId: string, wanted: readonly JobState[], timeoutMs: number, job: JobSnapshot) =>
    `waitForJobState: job ${jobId} (${job.type}) did not reach ${wanted.join(' or ')} within ${timeoutMs} ms; ` +
    `it is ${job.state} (attempt ${job.currentAttempt} of ${job.maxAttempts}, run at ${job.runAt.toISOString()}, ` +
    `last error: ${errorText(job.error)}).`,
  jobEndedElsewhere: (jobId: string, wanted: readonly JobState[], job: JobSnapshot) =>
    `waitForJobState: job ${jobId} (${job.type}) ended ${job.state} and will never reach ${wanted.join(' or ')} ` +
    `(attempt ${job.currentAttempt} of ${job.maxAttempts}, error: ${errorText(job.error)}).`,
};
