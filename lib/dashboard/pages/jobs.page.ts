import { WorkhorseValidationError } from '../../core/errors';
import { JOB_STATES, type JobSnapshot, type ListJobsFilter } from '../../core/types';
import { checkJobId } from '../../core/validation';
import { stateBadge, time, truncate } from '../format';
import { html, type Html } from '../html';
import { table } from '../layout';
import type { DashboardPage, PageContext } from '../page';
import type { JobDuration } from '../../core/operator/job-insights';
import { DashboardHttpError } from '../http-request';
import { durationText, jobIdOf, readListing, type ListingSource } from './job-search';
import { optionalName, optionalTime, pageSize, pager, states, timeFieldValue } from './listing';
import { BULK_ACTIONS, bulkControls, bulkVerbs } from './job-bulk';

/**
 * How many jobs one page of the listing may examine. A filter that matches rarely (a state few
 * jobs are in, a queue and a type together) then answers in bounded time, however long the
 * history, and the page offers to search further back.
 */
export const JOB_SCAN_LIMIT = 10_000;

function filterOf(query: URLSearchParams): ListJobsFilter {
  return {
    queue: optionalName(query, 'queue'),
    type: optionalName(query, 'type'),
    states: states(query),
    createdAfter: optionalTime(query, 'after'),
    createdBefore: optionalTime(query, 'before'),
    parentId: parentOf(query),
  };
}

/** `parent`: list that job's children (in the order they were started) instead of all jobs. */
function parentOf(query: URLSearchParams): string | undefined {
  const value = query.get('parent')?.trim().toLowerCase();
  return value ? checkJobId(value, 'parent') : undefined;
}

function filterForm(context: PageContext, filter: ListJobsFilter, error: string | null): Html {
  const chosen = new Set(filter.states ?? []);
  const q = context.query;
  return html`<form method="get" action="${context.href('jobs')}" class="search" role="search">
    <label>Job id <input name="q" value="${q.get('q') ?? ''}" maxlength="64" placeholder="0193a1f2-5c7e-7d1a-9b1c-2f3e4d5c6b7a" spellcheck="false"></label>
    <button type="submit">Open</button>
  </form>
  <form method="get" action="${context.href('jobs')}" class="filters">
    ${filter.parentId && html`<p class="scope">Children of <a class="id" href="${context.href(`jobs/${filter.parentId}`)}">${filter.parentId}</a><input type="hidden" name="parent" value="${filter.parentId}"></p>`}
    <label>Queue <input name="queue" value="${q.get('queue') ?? ''}" maxlength="128"></label>
    <label>Type <input name="type" value="${q.get('type') ?? ''}" maxlength="128"></label>
    <fieldset><legend>State</legend>${JOB_STATES.map(
      (state) => html`<label class="check"><input type="checkbox" name="state" value="${state}"${chosen.has(state) ? html` checked` : ''}>${state}</label>`,
    )}</fieldset>
    <label>Created after (UTC) <input type="datetime-local" name="after" value="${timeFieldValue(filter.createdAfter)}"></label>
    <label>Created before (UTC) <input type="datetime-local" name="before" value="${timeFieldValue(filter.createdBefore)}"></label>
    <label>Tag <input name="tag" value="${q.get('tag') ?? ''}" maxlength="200"></label>
    <label>Payload contains <input name="payload" value="${q.get('payload') ?? ''}" maxlength="4096" placeholder='{"orderId": 42}' spellcheck="false"></label>
    <label>Error name or message <input name="error" value="${q.get('error') ?? ''}" maxlength="200"></label>
    <label>Per page <select name="limit">${[25, 50, 100].map((n) => html`<option${n === pageSize(q) ? html` selected` : ''}>${n}</option>`)}</select></label>
    <button type="submit">Filter</button> <a href="${context.href('jobs')}">Clear</a>
    ${error && html`<p class="error" role="alert">${error}</p>`}
  </form>`;
}

/** The error column: the terminal error, or the last attempt's while a retry waits. */
function errorCell(job: JobSnapshot): Html {
  if (!job.error) return html`<td></td>`;
  return html`<td class="error-text" title="${truncate(job.error.message, 1000)}"><strong>${job.error.name}</strong>: ${truncate(job.error.message, 120)}</td>`;
}

/** A row of the job listing. */
function jobRow(context: PageContext, job: JobSnapshot, duration: JobDuration | undefined, selectable: boolean): Html {
  return html`<tr data-job="${job.id}">
    ${selectable && html`<td><input type="checkbox" name="id" value="${job.id}" aria-label="Select ${job.id}"></td>`}
    <td class="id"><a href="${context.href(`jobs/${job.id}`)}">${job.id}</a></td>
    <td>${job.type}</td>
    <td><a href="${context.href('jobs', { queue: job.queue })}">${job.queue}</a></td>
    <td>${stateBadge(job.state)}</td>
    <td class="num">${job.currentAttempt}/${job.maxAttempts}</td>
    <td class="num" data-col="run">${durationText(duration?.runMs)}</td>
    <td class="num" data-col="wait">${durationText(duration?.waitMs)}</td>
    ${errorCell(job)}
    <td>${time(job.createdAt)}</td>
    <td>${time(job.finishedAt ?? job.runAt)}</td>
  </tr>`;
}

const JOB_COLUMNS = ['Job', 'Type', 'Queue', 'State', 'Attempt', 'Run time', 'Waited', 'Error', 'Created', 'Run at / finished'];

const SOURCE_NOTES: Record<ListingSource, string> = {
  jobs: 'Newest first.',
  failed: 'Failed jobs, newest failure first, read from the index of failures.',
  find: 'Search results, newest first.',
};

/** Jobs newest first, filtered by queue, type, states and creation time, a page at a time. */
export const jobsPage: DashboardPage = {
  route: 'jobs',
  live: true,
  nav: 'Jobs',
  async render(context) {
    let filter: ListJobsFilter = {};
    try {
      const jump = jobIdOf(context.query);
      if (jump !== null) return { redirect: context.href(`jobs/${jump}`) };
      filter = filterOf(context.query);
      const limit = pageSize(context.query);
      const { source, page, durations } = await readListing(context, filter, limit, JOB_SCAN_LIMIT);
      const partial = page.nextCursor !== null && page.items.length < limit;
      const verbs = await bulkVerbs(context);
      const selectable = verbs.length > 0 && page.items.length > 0;
      const listing = table(
        selectable ? ['', ...JOB_COLUMNS] : JOB_COLUMNS,
        page.items.map((job) => jobRow(context, job, durations.get(job.id), selectable)),
        partial ? 'No matching job among the jobs searched so far.' : 'No job matches.',
      );
      const searching = ['payload', 'error', 'parent'].some((name) => context.query.get(name));
      return {
        title: 'Jobs',
        body: html`${filterForm(context, filter, null)}
          <p class="muted" id="listing-source" data-source="${source}">${SOURCE_NOTES[source]}</p>
          <div class="listing">${selectable ? bulkControls(context, verbs, listing, searching) : listing}</div>
          ${pager(context, 'jobs', page.nextCursor, partial ? `Search older jobs (${JOB_SCAN_LIMIT.toLocaleString('en')} at a time)` : 'Next page')}
          ${partial && html`<p class="muted">Each page examines at most ${JOB_SCAN_LIMIT.toLocaleString('en')} jobs, newest first, so that a rare match does not search the whole history at once.</p>`}`,
      };
    } catch (error) {
      if (error instanceof DashboardHttpError && error.status === 403) return { title: 'Jobs', status: 403, body: filterForm(context, filter, error.message) };
      if (!(error instanceof WorkhorseValidationError)) throw error;
      return { title: 'Jobs', status: 400, body: filterForm(context, filter, error.message) };
    }
  },
  actions: BULK_ACTIONS,
};
