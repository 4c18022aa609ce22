/**
 * nestjs-workhorse/dashboard/handler: the operator dashboard as a plain Node request handler,
 * for `http`, Express and Fastify, without any Nest package. Nest applications use
 * `WorkhorseDashboardModule` from `nestjs-workhorse/dashboard`.
 *
 * @example
 * import { createDashboardHandler } from 'nestjs-workhorse/dashboard/handler';
 * app.use(createDashboardHandler({ admin, path: '/workhorse', authorize: (request, action) => action === 'read' }));
 */
export { DASHBOARD_ACTIONS, type DashboardAction, type DashboardMutation } from './dashboard-actions';
export { createDashboardHandler, type DashboardHandler } from './dashboard-handler';
export type { DashboardAuthorize, DashboardOptions } from './dashboard-options';
