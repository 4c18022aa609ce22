import { InvalidCronError, UnknownTimeZoneError, WorkhorseValidationError } from '../core/errors';
import { checkQueuePolicy } from '../core/queue-policy';
import { toWireSchedules } from '../core/schedules/definition';
import { checkName } from '../core/validation';
import { checkMetricsOptions, checkWorkerOptions } from '../core/worker';
import { WorkhorseConfigurationError } from './workhorse-configuration.error';
import type { WorkhorseModuleOptions } from './workhorse-module-options.interface';
import { messages } from './workhorse.messages';

const OPTION_KEYS = [
  'connectionString',
  'pool',
  'poolConfig',
  'schema',
  'worker',
  'metrics',
  'requestTransactions',
  'transaction',
  'requireTransaction',
  'schedules',
  'scheduleNamespace',
  'syncSchedules',
  'queues',
] as const;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function looksLikePool(value: unknown): boolean {
  const pool = value as { connect?: unknown; query?: unknown; end?: unknown } | null;
  return (
    typeof pool === 'object' &&
    pool !== null &&
    typeof pool.connect === 'function' &&
    typeof pool.query === 'function' &&
    typeof pool.end === 'function'
  );
}

/**
 * Checks the module options before anything is created. The worker settings are checked by the
 * core's own `checkWorkerOptions`, the rules the core `Worker` applies, so they live in one place.
 */
export function validateModuleOptions(options: unknown): WorkhorseModuleOptions {
  const fail = (message: string): never => {
    throw new WorkhorseConfigurationError(message);
  };
  if (!isPlainObject(options)) return fail(messages.optionsNotObject(options));
  for (const key of Object.keys(options)) {
    if (!(OPTION_KEYS as readonly string[]).includes(key)) fail(messages.unknownOption(key, OPTION_KEYS));
  }
  const { connectionString, pool, poolConfig, schema, worker, requestTransactions, transaction } = options;
  if (connectionString === undefined && pool === undefined) fail(messages.noDatabase());
  if (connectionString !== undefined && pool !== undefined) fail(messages.twoDatabases());
  if (connectionString !== undefined && (typeof connectionString !== 'string' || connectionString.length === 0)) {
    fail(messages.badConnectionString(connectionString));
  }
  if (pool !== undefined && !looksLikePool(pool)) fail(messages.badPool(pool));
  if (poolConfig !== undefined) {
    if (pool !== undefined) fail(messages.poolConfigWithPool());
    if (!isPlainObject(poolConfig)) fail(messages.badPoolConfig(poolConfig));
    if ((poolConfig as Record<string, unknown>).connectionString !== undefined) fail(messages.poolConfigConnectionString());
  }
  if (schema !== undefined && schema !== 'install' && schema !== 'verify') fail(messages.badSchemaMode(schema));
  if (worker !== undefined && worker !== false && !isPlainObject(worker) && !Array.isArray(worker)) fail(messages.badWorker(worker));
  if (worker) checkWorker(worker);
  checkMetrics(options.metrics);
  if (requestTransactions !== undefined && typeof requestTransactions !== 'boolean') {
    fail(messages.badRequestTransactions(requestTransactions));
  }
  if (options.requireTransaction !== undefined && typeof options.requireTransaction !== 'boolean') {
    fail(messages.badRequireTransaction(options.requireTransaction));
  }
  if (transaction !== undefined && typeof (transaction as { current?: unknown } | null)?.current !== 'function') {
    fail(messages.badTransactionSource(transaction));
  }
  checkQueues(options.queues);
  checkScheduleOptions(options, fail);
  return options as WorkhorseModuleOptions;
}

// Schedules are checked here as queue.syncSchedules checks them before it calls the database:
// their fields and JSON (a configuration error). Their values (names, cron, zone, catch-up,
// overlap, ranges) are sync_schedules_v1's, checked when the module syncs them at start.
function checkScheduleOptions(options: Record<string, unknown>, fail: (message: string) => never): void {
  const { schedules, scheduleNamespace, syncSchedules } = options;
  if (syncSchedules !== undefined && typeof syncSchedules !== 'boolean') fail(messages.badSyncSchedules(syncSchedules));
  if (schedules !== undefined && !Array.isArray(schedules)) fail(messages.badSchedules(schedules));
  try {
    if (scheduleNamespace !== undefined) checkName(scheduleNamespace, 'scheduleNamespace');
  } catch (error) {
    if (error instanceof WorkhorseValidationError) fail(messages.badScheduleNamespace(error.message.slice('scheduleNamespace: '.length)));
    throw error;
  }
  try {
    toWireSchedules('default', schedules ?? []);
  } catch (error) {
    if (error instanceof InvalidCronError || error instanceof UnknownTimeZoneError) throw error;
    if (error instanceof WorkhorseValidationError) fail(messages.badSchedule(error.message.replace(/^definitions/, 'schedules')));
    throw error;
  }
}

// Each queue's policy is checked by the rules Admin.setQueuePolicy applies, named by its path.
function checkQueues(queues: unknown): void {
  if (queues === undefined) return;
  if (!isPlainObject(queues)) throw new WorkhorseConfigurationError(messages.badQueues(queues));
  for (const [name, policy] of Object.entries(queues)) {
    try {
      checkName(name, 'queue');
      if (!isPlainObject(policy)) throw new WorkhorseValidationError('policy', 'must be an object { concurrency?, rateLimit?, perKey? }');
      checkQueuePolicy(policy);
    } catch (error) {
      if (error instanceof WorkhorseValidationError) throw new WorkhorseConfigurationError(messages.badQueuePolicy(name, error.field, error.message));
      throw error;
    }
  }
}

// The list form is the core's `groups`: its errors are named as the user wrote them (`worker[1].queues`).
function checkWorker(worker: object): void {
  if (!Array.isArray(worker) && 'metrics' in worker) throw new WorkhorseConfigurationError(messages.workerMetrics());
  try {
    checkWorkerOptions(Array.isArray(worker) ? { groups: worker } : worker);
  } catch (error) {
    if (error instanceof WorkhorseValidationError) {
      const detail = Array.isArray(worker) ? error.message.replace(/^groups(?=\[|:)/, '') : `.${error.message}`;
      throw new WorkhorseConfigurationError(messages.badWorkerOption(detail));
    }
    throw error;
  }
}

function checkMetrics(metrics: unknown): void {
  if (metrics === undefined) return;
  try {
    checkMetricsOptions(metrics);
  } catch (error) {
    if (error instanceof WorkhorseValidationError) throw new WorkhorseConfigurationError(messages.badMetrics(error.message));
    throw error;
  }
}
