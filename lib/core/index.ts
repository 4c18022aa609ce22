/**
 * nestjs-workhorse core: a durable job queue inside PostgreSQL, usable without Nest.
 *
 * @example
 * import { Pool, Queue, Worker, installSchema } from 'nestjs-workhorse';
 * const pool = new Pool({ connectionString: process.env.DATABASE_URL });
 * await installSchema(pool);
 * const queue = new Queue(pool);
 * await queue.enqueue('email.send', { to: 'a@example.com' });
 */
export { Pool, type PoolClient, type PoolConfig } from 'pg';
export { Admin } from './admin';
export type { BulkActionOptions, BulkActionResult, BulkActionSample, DeleteJobResult, JobActionFilter, JobActionState, RescheduleOptions, RescheduleResult, RunNowResult } from './job-actions';
export { HandlerContext, JobBlocked, JobSleeping } from './context';
export { JobWaiting } from './handler-waits';
export {
  ConnectTimeoutError,
  DecisionNotAllowedError,
  ExecutionTimeoutError,
  HumanWaitTimeoutError,
  ChildJobConflictError,
  ChildJobFailedError,
  IdempotencyConflictError,
  InvalidCronError,
  InvalidCursorError,
  JobDataRejectedError,
  JobCanceledError,
  LeaseLostError,
  NonRetryableError,
  RetryAfterError,
  ScheduleNotFoundError,
  SchemaNotInstalledError,
  SchemaMigrationError,
  SchemaVersionMismatchError,
  SignalTimeoutError,
  UnknownDependencyError,
  UnknownTimeZoneError,
  WorkerShutdownError,
  WorkerStateError,
  WorkhorseError,
  WorkhorseValidationError,
} from './errors';
export { fromPgError, IsolationError, SQLSTATE } from './protocol/errors';
export { NotYoursError } from './capability-errors';
export { JobActionRefusedError } from './job-action-errors';
export {
  isWorkerEventName,
  WORKER_EVENT_NAMES,
  type AbandonReason,
  type RecurringOperation,
  type RecurringTask,
  type WorkerErrorDuring,
  type WorkerEvent,
  type WorkerGroupInfo,
  type WorkerEventListener,
  type WorkerEventName,
  type WorkerEventOf,
} from './events';
export {
  defineJob,
  type DefinedEnqueueRequest,
  type EnqueueManyRequests,
  type JobDefaults,
  type JobDefinition,
  type JobDefinitionOptions,
} from './job-definition';
export { Queue, type DedupedEnqueueOptions } from './queue';
export type { WaitForResultOptions } from './result-waiters';
export { JobFailedError, JobNotFoundError, JobResultCanceledError, WaitForResultTimeoutError, type JobErrorEnvelope } from './result-errors';
export { CAPABILITIES, GRANT_ROLE_SQL, grantAppRole, grantRole, type Capability } from './grants';
export type {
  StandardSchemaInput,
  StandardSchemaIssue,
  StandardSchemaOutput,
  StandardSchemaProps,
  StandardSchemaResult,
  StandardSchemaV1,
} from './standard-schema';
export { DEFAULT_SCHEDULE_NAMESPACE } from './schedules/admin-calls';
export { planSchedules } from './schedules/sync';
export type * from './schedules/types';
export {
  getSchemaStatus,
  installSchema,
  MIN_SCHEMA_VERSION,
  pendingMigrationSteps,
  SCHEMA_VERSION,
  verifySchema,
  type InstallSchemaResult,
  type SchemaStatus,
} from './schema';
export type { MigrationStepInfo } from './migration-steps';
export { DEFAULT_CONNECT_TIMEOUT_MS } from './connect-timeout';
export { TransactionScope, type TransactionSource } from './transaction-scope';
export * from './types';
export { LIMITS } from './validation';
export {
  toErrorEnvelope,
  Worker,
  type HandlerOptions,
  type JobHandlerFn,
  type QueueDepthScope,
  type WorkerGroupOptions,
  type WorkerGroupStatus,
  type WorkerMetricsOptions,
  type WorkerOptions,
} from './worker';
export type {
  CompleteHumanWaitOptions,
  CompleteHumanWaitStatus,
  HumanDecision,
  HumanWait,
  ListHumanWaitsFilter,
  SendSignalOptions,
  SendSignalStatus,
  WaitForHumanOptions,
  WaitForSignalOptions,
} from './waits';
export type { JobSignal, JobWait, JobWaitsOptions } from './job-waits';
export type { DrainResult, WorkerInfo, WorkerStatus } from './operator/live-workers';
export type { ErrorGroup, FindJobsFilter, JobDuration, TimingStats } from './operator/job-insights';
export type { HealthReason, HealthReasonCode, HealthReport, HealthStatus, HealthThresholds, QueueHealth, ThresholdPair } from './operator/health';
export type { RetentionPolicy, RetentionRun, RetentionStatus } from './operator/retention';
export type { OperatorChange, OperatorChangeFilter, OperatorChangeKind } from './operator/operator-changes';
export { EventLog, type WorkhorseLogger } from './worker';
