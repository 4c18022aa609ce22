/**
 * Every request the dashboard serves is one of these actions, and `authorize(request, action)`
 * decides each. `read` covers every page (job metadata, states, errors, timelines, queues);
 * `read-data` additionally shows payloads, results, progress and checkpoint values, which are
 * the application's data; each other action is one kind of change.
 *
 * The list is closed and checked at compile time: a page can only ask for an action named here,
 * and an `authorize` that switches over `DashboardAction` with a `never` default stops compiling
 * when a release adds one, so a new kind of change is never allowed by accident.
 */
export const DASHBOARD_ACTIONS = ['read', 'read-data', 'cancel-job', 'run-job-now', 'delete-job', 'redrive-job', 'pause-queue', 'resume-queue', 'decide-wait', 'set-queue-limits', 'pause-schedule', 'resume-schedule', 'trigger-schedule', 'drain-worker'] as const;

/** One of {@link DASHBOARD_ACTIONS}. */
export type DashboardAction = (typeof DASHBOARD_ACTIONS)[number];

/** The actions that change something: refused in a read-only dashboard, whatever `authorize` says. */
export type DashboardMutation = Exclude<DashboardAction, 'read' | 'read-data'>;

export function isDashboardMutation(action: DashboardAction): action is DashboardMutation {
  return action !== 'read' && action !== 'read-data';
}
