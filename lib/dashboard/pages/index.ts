import type { DashboardPage } from '../page';
import { changesPage } from './changes.page';
import { API_PAGES } from './api';
import { deadLettersPage } from './dead-letters.page';
import { jobDataPage, jobPage } from './job.page';
import { jobsPage } from './jobs.page';
import { overviewPage } from './overview.page';
import { queuesPage } from './queues.page';
import { waitsPage } from './waits.page';
import { scheduleHistoryPage, schedulesPage } from './schedules.page';
import { timingsPage } from './timings.page';
import { workersPage } from './workers.page';

/**
 * Every page of the dashboard, in navigation order. A new page (schedules, workers, human
 * waits) is one more entry: its route, its view and the changes it offers, whose actions must
 * be in DASHBOARD_ACTIONS.
 */
export const DASHBOARD_PAGES: readonly DashboardPage[] = [overviewPage, jobsPage, jobPage, jobDataPage, deadLettersPage, timingsPage, queuesPage, waitsPage, schedulesPage, scheduleHistoryPage, workersPage, changesPage, ...API_PAGES];
