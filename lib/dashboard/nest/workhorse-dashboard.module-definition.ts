import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { WorkhorseDashboardModuleOptions } from './workhorse-dashboard-module-options.interface';

// forRoot and forRootAsync (useFactory, useClass, useExisting, imports) from one definition.
export const {
  ConfigurableModuleClass: ConfigurableWorkhorseDashboardModule,
  MODULE_OPTIONS_TOKEN: WORKHORSE_DASHBOARD_OPTIONS,
  ASYNC_OPTIONS_TYPE: WORKHORSE_DASHBOARD_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<WorkhorseDashboardModuleOptions>({ moduleName: 'WorkhorseDashboard' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createWorkhorseDashboardOptions')
  .build();

/**
 * What `WorkhorseDashboardModule.forRootAsync` accepts: `imports`, and `useFactory` + `inject`,
 * or `useClass` / `useExisting`.
 *
 * @example
 * const options: WorkhorseDashboardModuleAsyncOptions = {
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ path: '/workhorse', authorize: () => config.get('DASHBOARD_OPEN') === 'yes' }),
 * };
 */
export type WorkhorseDashboardModuleAsyncOptions = typeof WORKHORSE_DASHBOARD_ASYNC_OPTIONS_TYPE;
