/**
 * The Nest integration: `WorkhorseModule`, `@JobHandler`, transactions (`@Transactional()`,
 * `WorkhorseTransactionHost`, `WorkhorseTransactionInterceptor`) and the lifecycle-managed
 * `WorkhorseWorker` with its event stream. Inject `Queue` and `Admin` by the core classes.
 */
export { JobHandler, type TypedJobHandlerDecorator } from './job-handler.decorator';
export { ofWorkhorseEvent } from './of-workhorse-event.operator';
export { OnWorkhorseEvent } from './on-workhorse-event.decorator';
export { Transactional } from './transactional.decorator';
export { WorkhorseConfigurationError } from './workhorse-configuration.error';
export { WORKHORSE_EVENT_NAMES } from './workhorse.constants';
export type {
  JobHandlerOptions,
  JobHandlerSchedule,
  WorkhorseMetricsOptions,
  WorkhorseModuleOptions,
  WorkhorseWorkerGroupOptions,
  WorkhorseWorkerOptions,
} from './workhorse-module-options.interface';
export { WorkhorseModule } from './workhorse.module';
export {
  WORKHORSE_MODULE_OPTIONS,
  type WorkhorseModuleAsyncOptions,
  type WorkhorseOptionsFactory,
} from './workhorse.module-definition';
export { TransactionRequiredError, WorkhorseTransactionError } from './workhorse-transaction.error';
export { WorkhorseTransactionHost } from './workhorse-transaction.host';
export { WorkhorseTransactionInterceptor } from './workhorse-transaction.interceptor';
export { WorkhorseScheduler } from './workhorse.scheduler';
export { WorkhorseWorker, type RunOnceOptions } from './workhorse.worker';
