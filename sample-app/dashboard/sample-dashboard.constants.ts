/** Injection token of the sample dashboard's options. */
export const SAMPLE_DASHBOARD_OPTIONS = Symbol('SAMPLE_DASHBOARD_OPTIONS');

export interface SampleDashboardOptions {
  /** Where the dashboard is mounted. */
  path: string;
  /** The token that makes a request the operator's (job data and changes). */
  operatorToken: string;
}
