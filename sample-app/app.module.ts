import { Module, type DynamicModule } from '@nestjs/common';
import { WorkhorseModule, type QueueDepthScope, type WorkhorseWorkerOptions } from 'nestjs-workhorse';
import { SampleDashboardModule } from './dashboard/sample-dashboard.module';
import { OperationsModule } from './operations/operations.module';
import { OrdersModule } from './orders/orders.module';

export interface AppOptions {
  /** The database of the orders and of the queue. */
  databaseUrl: string;
  /**
   * This process's worker: its options, or `false` for a process that serves HTTP and enqueues
   * but never claims a job (`api.ts`).
   */
  worker: WorkhorseWorkerOptions | false;
  /** Shows in `pg_stat_activity`: which process holds which connection. */
  applicationName: string;
  /** See `OrdersModuleOptions.labelDelayMs`. Default 0. */
  labelDelayMs?: number;
  /**
   * The operator dashboard at `/workhorse` (processes that serve HTTP), with the token that lets
   * a request see job data and make changes (read-only without it); `false` for none.
   */
  dashboard: { operatorToken: string } | false;
  /**
   * The queues of the `workhorse.queue.depth` gauge at `GET /metrics`: `'all'` in the HTTP
   * processes (a queue no worker serves shows up too), `false` where nothing serves the metrics.
   * Default `'own'`. With several API replicas, give `'all'` to one (docs/operations.md#metrics).
   */
  queueDepth?: QueueDepthScope;
}

/** Where the operator dashboard is served. */
export const DASHBOARD_PATH = '/workhorse';

/**
 * The sample application: one module, run three ways (`main.ts`: HTTP and worker in one process;
 * `api.ts`: HTTP only; `worker.ts`: worker only). Only the `worker` option differs.
 */
@Module({})
export class AppModule {
  static register(options: AppOptions): DynamicModule {
    return {
      module: AppModule,
      imports: [
        WorkhorseModule.forRoot({
          connectionString: options.databaseUrl,
          // Room above the worker's concurrency for claims, completions, maintenance and requests.
          poolConfig: { max: 10, application_name: options.applicationName },
          schema: 'install',
          worker: options.worker,
          metrics: { queueDepth: options.queueDepth ?? 'own' },
        }),
        OrdersModule.register({ labelDelayMs: options.labelDelayMs ?? 0 }),
        OperationsModule,
        ...(options.dashboard ? [SampleDashboardModule.register({ path: DASHBOARD_PATH, operatorToken: options.dashboard.operatorToken })] : []),
      ],
    };
  }
}
