/**
 * The worker, one part per file: options and their checks (`worker-options`), the lifecycle
 * (`worker`), claims and completions (`round-trips`, `lane`), handler execution (`executor`,
 * `execution`), the statements it sends as a job's owner (`../protocol/owner-statements`), leases
 * (`heartbeater`), maintenance (`ticker`), events (`event-hub`) and the error envelope
 * (`error-envelope`).
 */
export { toErrorEnvelope } from './error-envelope';
export { EventLog, type WorkhorseLogger } from './event-log';
export { Worker, type WorkerGroupStatus } from './worker';
export {
  checkHandlerOptions,
  checkMetricsOptions,
  checkWorkerOptions,
  type HandlerOptions,
  type HandlerSettings,
  type JobHandlerFn,
  type QueueDepthScope,
  type WorkerGroupOptions,
  type WorkerGroupSettings,
  type WorkerMetricsOptions,
  type WorkerOptions,
  type WorkerSettings,
} from './worker-options';
