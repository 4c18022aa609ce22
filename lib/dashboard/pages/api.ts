import { WorkhorseValidationError } from '../../core/errors';
import type { JobSnapshot, ListJobsFilter } from '../../core/types';
import type { DashboardPage, JsonView, PageContext } from '../page';
import type { JobDuration } from '../../core/operator/job-insights';
import { readListing } from './job-search';
import { optionalName, optionalTime, states } from './listing';

// The read-only JSON API under `api/`: the jobs (with the listing's filters and searches), one
// job, the queues and the health, for scripts and other tools. Every request passes the same
// host check and `authorize(request, 'read')` as the pages; payloads, results and progress need
// `read-data` as on the pages (without it they are null and named in `hidden`). GET and HEAD
// only: it offers no change, so a form token is never needed.

const DATA_FIELDS = ['payload', 'result', 'progress'] as const;

/** A job as the API answers it: the snapshot, its data hidden without `read-data`, and its timings. */
async function jobJson(context: PageContext, job: JobSnapshot, duration?: JobDuration): Promise<Record<string, unknown>> {
  const data = await context.can('read-data');
  const answer: Record<string, unknown> = { ...job };
  if (!data) {
    for (const field of DATA_FIELDS) answer[field] = null;
    answer.hidden = [...DATA_FIELDS];
  }
  if (duration !== undefined) answer.timing = duration;
  return answer;
}

function apiLimit(query: URLSearchParams): number {
  const text = query.get('limit');
  if (text === null || text === '') return 50;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > 1000) throw new WorkhorseValidationError('limit', 'must be an integer from 1 to 1000');
  return value;
}

function error(status: number, field: string | null, message: string): JsonView {
  return { status, json: { error: { status, field, message } } };
}

/** A validation error as a 400 naming the field; anything else is the handler's to answer. */
async function answer(read: () => Promise<JsonView>): Promise<JsonView> {
  try {
    return await read();
  } catch (caught) {
    if (caught instanceof WorkhorseValidationError) return error(400, caught.field ?? null, caught.message);
    throw caught;
  }
}

export const apiJobsPage: DashboardPage = {
  route: 'api/jobs',
  render: (context) =>
    answer(async () => {
      const q = context.query;
      const filter: ListJobsFilter = {
        queue: optionalName(q, 'queue'),
        type: optionalName(q, 'type'),
        states: states(q),
        createdAfter: optionalTime(q, 'after'),
        createdBefore: optionalTime(q, 'before'),
      };
      const { source, page, durations } = await readListing(context, filter, apiLimit(q), 10_000);
      const items = await Promise.all(page.items.map((job) => jobJson(context, job, durations.get(job.id))));
      return { json: { source, items, nextCursor: page.nextCursor } };
    }),
};

export const apiJobPage: DashboardPage = {
  route: 'api/jobs/:id',
  render: (context) =>
    answer(async () => {
      const job = await context.admin.getJob(context.params.id.trim().toLowerCase());
      if (job === null) return error(404, 'id', 'no job has this id');
      const durations = await context.admin.jobDurations([job.id]);
      return { json: await jobJson(context, job, durations.get(job.id)) };
    }),
};

export const apiQueuesPage: DashboardPage = {
  route: 'api/queues',
  render: (context) => answer(async () => ({ json: { items: await context.admin.listQueues() } })),
};

export const apiHealthPage: DashboardPage = {
  route: 'api/health',
  render: (context) => answer(async () => ({ json: await context.admin.health(context.healthThresholds) })),
};

/** The API's routes, in the order they are matched. */
export const API_PAGES: readonly DashboardPage[] = [apiJobsPage, apiJobPage, apiQueuesPage, apiHealthPage];
