import type { Admin } from '../../core/admin';
import type { DashboardOptions } from '../dashboard-options';

/**
 * Options of `WorkhorseDashboardModule.forRoot`: those of the dashboard handler, with `admin`
 * optional (by default the `Admin` that `WorkhorseModule` provides).
 */
export interface WorkhorseDashboardModuleOptions extends Omit<DashboardOptions, 'admin'> {
  admin?: Admin;
}
