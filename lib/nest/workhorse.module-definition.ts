import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { WorkhorseModuleOptions } from './workhorse-module-options.interface';

// One definition gives forRoot and forRootAsync (useFactory, useClass, useExisting, imports);
// the module is global unless `isGlobal: false` is passed. WORKHORSE_MODULE_OPTIONS is the
// injection token of the resolved options (e.g. `@Inject(WORKHORSE_MODULE_OPTIONS) options`).
export const {
  ConfigurableModuleClass: ConfigurableWorkhorseModule,
  MODULE_OPTIONS_TOKEN: WORKHORSE_MODULE_OPTIONS,
  OPTIONS_TYPE: WORKHORSE_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: WORKHORSE_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<WorkhorseModuleOptions>({ moduleName: 'Workhorse' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createWorkhorseOptions')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();

/**
 * What `WorkhorseModule.forRootAsync` accepts: `imports`, and `useFactory` + `inject`, or
 * `useClass` / `useExisting` (a {@link WorkhorseOptionsFactory}); plus `isGlobal`.
 *
 * @example
 * const asyncOptions: WorkhorseModuleAsyncOptions = {
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ connectionString: config.getOrThrow('DATABASE_URL') }),
 * };
 */
export type WorkhorseModuleAsyncOptions = typeof WORKHORSE_ASYNC_OPTIONS_TYPE;

/**
 * A class for `forRootAsync({ useClass })` or `useExisting`: returns the module options.
 *
 * @example
 * @Injectable()
 * class WorkhorseConfig implements WorkhorseOptionsFactory {
 *   constructor(private readonly config: AppConfig) {}
 *   createWorkhorseOptions(): WorkhorseModuleOptions {
 *     return { connectionString: this.config.databaseUrl };
 *   }
 * }
 */
export interface WorkhorseOptionsFactory {
  createWorkhorseOptions(): WorkhorseModuleOptions | Promise<WorkhorseModuleOptions>;
}
