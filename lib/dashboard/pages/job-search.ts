import { WorkhorseValidationError } from '../../core/errors';
import type { FindJobsFilter, JobDuration } from '../../core/operator/job-insights';
import type { JobSnapshot, JsonValue, ListJobsFilter, Page } from '../../core/types';
import { DashboardHttpError } from '../http-request';
import type { PageContext } from '../page';
import { optionalText } from './listing';

// How the job listing finds its jobs: by id (a jump to the job), by tag, payload or error
// (Admin.findJobs), the failed ones through the dead-letter index (Admin.listDeadLetters), or in
// creation order (Admin.listJobs). The rules of each read are in SQL.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The job id the search box holds, or null when it is empty; anything else is a 400 naming it. */
export function jobIdOf(query: URLSearchParams): string | null {
  const value = query.get('q')?.trim().toLowerCase();
  if (!value) return null;
  if (!UUID.test(value)) throw new WorkhorseValidationError('q', 'must be a job id (a UUID such as 0193a1f2-5c7e-7d1a-9b1c-2f3e4d5c6b7a)');
  return value;
}

/** The search filters of the query string (tag, payload, error), or null when none is given. */
export function searchOf(query: URLSearchParams): Pick<FindJobsFilter, 'tag' | 'payload' | 'error'> | null {
  const tag = optionalText(query, 'tag', 200);
  const error = optionalText(query, 'error', 200);
  const text = optionalText(query, 'payload', 4096);
  let payload: { [key: string]: JsonValue } | undefined;
  if (text !== undefined) {
    try {
      payload = JSON.parse(text) as { [key: string]: JsonValue };
    } catch {
      throw new WorkhorseValidationError('payload', 'must be a JSON object, such as {"orderId": 42}');
    }
  }
  if (tag === undefined && error === undefined && payload === undefined) return null;
  return { tag, payload, error };
}

export type ListingSource = 'find' | 'failed' | 'jobs';

/** A page of the listing and which read produced it. */
export interface ListingPage {
  source: ListingSource;
  page: Page<JobSnapshot>;
  durations: Map<string, JobDuration>;
}

/**
 * A page of jobs for the listing's filters. A search by payload reveals what payloads hold, so
 * it needs `read-data`. Failed jobs alone (with no creation-time window) are read from the
 * dead-letter index, newest failure first, instead of filtering creation order.
 */
export async function readListing(context: PageContext, filter: ListJobsFilter, limit: number, scanLimit: number): Promise<ListingPage> {
  const cursor = context.query.get('cursor') ?? undefined;
  const search = searchOf(context.query);
  let source: ListingSource;
  let page: Page<JobSnapshot>;
  if (search !== null) {
    if (filter.queue || filter.type || filter.states || filter.createdAfter || filter.createdBefore || filter.parentId) {
      throw new WorkhorseValidationError('tag', 'a search by tag, payload or error takes no queue, type, state or time filter: clear them first');
    }
    if (search.payload !== undefined && !(await context.can('read-data'))) {
      throw new DashboardHttpError(403, 'Searching by payload shows what payloads hold: it needs the read-data permission.');
    }
    source = 'find';
    page = await context.admin.findJobs({ ...search, limit, scanLimit, cursor });
  } else if (filter.states?.length === 1 && filter.states[0] === 'failed' && !filter.createdAfter && !filter.createdBefore && !filter.parentId) {
    source = 'failed';
    page = await context.admin.listDeadLetters({ queue: filter.queue, type: filter.type, limit, cursor });
  } else {
    source = 'jobs';
    page = await context.admin.listJobs({ ...filter, limit, scanLimit, cursor });
  }
  const durations = page.items.length === 0 ? new Map<string, JobDuration>() : await context.admin.jobDurations(page.items.map((job) => job.id));
  return { source, page, durations };
}

/** `850 ms`, `12.4 s`, `3 min 5 s`, `2 h 10 min`. */
export function durationText(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '-';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}
