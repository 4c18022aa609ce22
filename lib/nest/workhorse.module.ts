import { Module, type NestInterceptor, type OnApplicationShutdown } from '@nestjs/common';
import { APP_INTERCEPTOR, DiscoveryModule } from '@nestjs/core';
import { Admin } from '../core/admin';
import { Queue } from '../core/queue';
import { EnqueueOutsideTransactionCheck } from './enqueue-outside-transaction.check';
import { WorkhorseAdmin } from './workhorse-admin.provider';
import { WorkhorseConnection } from './workhorse.connection';
import { WorkhorseExplorer } from './workhorse.explorer';
import type { WorkhorseModuleOptions } from './workhorse-module-options.interface';
import { ConfigurableWorkhorseModule, WORKHORSE_MODULE_OPTIONS } from './workhorse.module-definition';
import { WorkhorseQueue } from './workhorse-queue.provider';
import { WorkhorseRegistry } from './workhorse.registry';
import { WorkhorseScheduler } from './workhorse.scheduler';
import { WorkhorseTransactionHost } from './workhorse-transaction.host';
import { WorkhorseTransactionInterceptor } from './workhorse-transaction.interceptor';
import { WorkhorseWorker } from './workhorse.worker';

const passThrough: NestInterceptor = { intercept: (_context, next) => next.handle() };

/**
 * The durable PostgreSQL job queue as a Nest module. `forRoot(options)` or
 * `forRootAsync({ imports, inject, useFactory | useClass | useExisting })` connects it (with
 * `connectionString` or an existing `pool`), installs or verifies the schema before anything
 * else starts, and provides `Queue`, `Admin` (inject them by the core classes),
 * `WorkhorseTransactionHost` and `WorkhorseWorker`. It is global unless `isGlobal: false`.
 * `@JobHandler` methods are discovered at start-up; with `worker` options this process runs
 * them. A pool the module created is closed when the application shuts down.
 *
 * @example
 * @Module({
 *   imports: [
 *     WorkhorseModule.forRootAsync({
 *       imports: [ConfigModule],
 *       inject: [ConfigService],
 *       useFactory: (config: ConfigService) => ({
 *         connectionString: config.getOrThrow('DATABASE_URL'),
 *         worker: config.get('RUN_WORKER') === 'true' ? { concurrency: 10 } : false,
 *         requestTransactions: true,
 *       }),
 *     }),
 *   ],
 *   providers: [EmailHandlers],
 * })
 * export class AppModule {}
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: WorkhorseConnection,
      useFactory: (options: unknown) => WorkhorseConnection.open(options),
      inject: [WORKHORSE_MODULE_OPTIONS],
    },
    {
      provide: WorkhorseTransactionHost,
      useFactory: (connection: WorkhorseConnection, options: WorkhorseModuleOptions) =>
        new WorkhorseTransactionHost(connection.pool, options.transaction),
      inject: [WorkhorseConnection, WORKHORSE_MODULE_OPTIONS],
    },
    WorkhorseRegistry,
    {
      provide: Queue,
      useFactory: (connection: WorkhorseConnection, host: WorkhorseTransactionHost, registry: WorkhorseRegistry, options: WorkhorseModuleOptions) =>
        new WorkhorseQueue(connection.pool, host, registry, EnqueueOutsideTransactionCheck.of(options)),
      inject: [WorkhorseConnection, WorkhorseTransactionHost, WorkhorseRegistry, WORKHORSE_MODULE_OPTIONS],
    },
    {
      provide: Admin,
      useFactory: (connection: WorkhorseConnection, host: WorkhorseTransactionHost) => new WorkhorseAdmin(connection.pool, host),
      inject: [WorkhorseConnection, WorkhorseTransactionHost],
    },
    WorkhorseExplorer,
    WorkhorseScheduler,
    WorkhorseWorker,
    {
      provide: APP_INTERCEPTOR,
      useFactory: (options: WorkhorseModuleOptions, host: WorkhorseTransactionHost) =>
        options.requestTransactions ? new WorkhorseTransactionInterceptor(host) : passThrough,
      inject: [WORKHORSE_MODULE_OPTIONS, WorkhorseTransactionHost],
    },
  ],
  exports: [Queue, Admin, WorkhorseTransactionHost, WorkhorseWorker, WorkhorseScheduler],
})
export class WorkhorseModule extends ConfigurableWorkhorseModule implements OnApplicationShutdown {
  constructor(private readonly connection: WorkhorseConnection) {
    super();
  }

  /** Closes the pool the module created (after the worker drained in `beforeApplicationShutdown`). */
  onApplicationShutdown(): Promise<void> {
    return this.connection.close();
  }
}
