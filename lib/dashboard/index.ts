/**
 * nestjs-workhorse/dashboard: the operator dashboard, as a Nest module
 * (`WorkhorseDashboardModule.forRoot({ path, authorize, readOnly })`) and as a plain Node
 * request handler (`createDashboardHandler`, also at `nestjs-workhorse/dashboard/handler`
 * without any Nest package).
 */
export * from './handler';
export type { WorkhorseDashboardModuleOptions } from './nest/workhorse-dashboard-module-options.interface';
export { WORKHORSE_DASHBOARD_OPTIONS, type WorkhorseDashboardModuleAsyncOptions } from './nest/workhorse-dashboard.module-definition';
export { WorkhorseDashboardModule } from './nest/workhorse-dashboard.module';
