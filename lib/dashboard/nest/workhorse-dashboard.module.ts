import { Inject, Module, Optional, RequestMethod, type MiddlewareConsumer, type NestModule } from '@nestjs/common';
import { Admin } from '../../core/admin';
import { WorkhorseConfigurationError } from '../../nest/workhorse-configuration.error';
import { createDashboardHandler, type DashboardHandler } from '../dashboard-handler';
import type { WorkhorseDashboardModuleOptions } from './workhorse-dashboard-module-options.interface';
import { ConfigurableWorkhorseDashboardModule, WORKHORSE_DASHBOARD_OPTIONS } from './workhorse-dashboard.module-definition';

/**
 * The operator dashboard, served by the Nest application itself at `path`. It reads and acts
 * through the `Admin` of `WorkhorseModule` (or the `admin` option), and every request passes
 * `authorize(request, action)`. Works on the Express and the Fastify platform (it is a
 * middleware for every route that answers only under `path`).
 *
 * @example
 * @Module({
 *   imports: [
 *     WorkhorseModule.forRoot({ connectionString: process.env.DATABASE_URL }),
 *     WorkhorseDashboardModule.forRoot({
 *       path: '/workhorse',
 *       authorize: (request, action) => action === 'read' || request.headers['x-operator-token'] === process.env.OPERATOR_TOKEN,
 *     }),
 *   ],
 * })
 * export class AppModule {}
 */
@Module({})
export class WorkhorseDashboardModule extends ConfigurableWorkhorseDashboardModule implements NestModule {
  private readonly handler: DashboardHandler;

  constructor(@Inject(WORKHORSE_DASHBOARD_OPTIONS) options: WorkhorseDashboardModuleOptions, @Optional() admin?: Admin) {
    super();
    const chosen = options.admin ?? admin;
    if (chosen === undefined) {
      throw new WorkhorseConfigurationError(
        'WorkhorseDashboardModule needs an Admin: import WorkhorseModule.forRoot(...) (global by default) or pass the admin option.',
      );
    }
    this.handler = createDashboardHandler({ ...options, admin: chosen });
  }

  configure(consumer: MiddlewareConsumer): void {
    // Every route, and the handler passes on what is not under its path: a route pattern of
    // its own would need the wildcard syntax of each Nest and router version.
    consumer.apply(this.handler).forRoutes({ path: '*', method: RequestMethod.ALL });
  }
}
