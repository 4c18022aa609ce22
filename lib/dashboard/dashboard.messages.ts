import type { DashboardAction } from './dashboard-actions';

/** What the dashboard tells a user whose request it refuses, each saying what to do. */
export const DASHBOARD_MESSAGES = {
  notFound: 'There is no such page in the dashboard.',
  methodNotAllowed: 'The dashboard answers GET, HEAD and POST only.',
  readRefused: 'You are not allowed to view the dashboard. Ask whoever runs this application for access.',
  readOnly: 'This dashboard is read-only: it shows everything and changes nothing.',
  crossOrigin: 'Changes are accepted only from the dashboard\u2019s own pages. Open the dashboard and try again there.',
  staleForm: 'The form has expired or did not come from this dashboard. Reload the page and try again.',
  unknownChange: 'This page offers no such change.',
  internal: 'The dashboard could not answer. The error has been reported to the application\u2019s log.',
  changeRefused: (action: DashboardAction): string => `You are not allowed to do this (${action}). Ask whoever runs this application for access.`,
  hostRefused: (host: string | null): string =>
    `This dashboard is not served on ${host === null ? 'a request without a valid Host header' : `the host ${host}`}. ` +
    'Open it under the name it is served on; whoever runs it can add this one to its allowedHosts option.',
  badActor: (max: number): string => `The dashboard's actor option must return a string of 1 to ${max} characters.`,
} as const;
