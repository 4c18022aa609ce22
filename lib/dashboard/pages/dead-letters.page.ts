import { randomUUID } from 'node:crypto';
import { WorkhorseValidationError } from '../../core/errors';
import type { DeadLetterFilter, JobLineage, JobSnapshot } from '../../core/types';
import { time, truncate } from '../format';
import { html, type Html } from '../html';
import { DashboardHttpError } from '../http-request';
import { changeForm, reasonField, reasonOf, table } from '../layout';
import type { ActionContext, DashboardPage, PageContext, PageView } from '../page';
import { optionalName, optionalText, optionalTime, pageSize, pager, timeFieldValue } from './listing';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** At most this many dead letters are redriven by one confirmation (as `redriveMany` does). */
const MAX_REDRIVE = 1000;
/** How many of the dead letters a preview lists one by one. */
const PREVIEW_ROWS = 100;

function filterOf(query: URLSearchParams): DeadLetterFilter {
  return {
    queue: optionalName(query, 'queue'),
    type: optionalName(query, 'type'),
    errorName: optionalText(query, 'error', 200),
    finishedAfter: optionalTime(query, 'after'),
    finishedBefore: optionalTime(query, 'before'),
  };
}

function filterFields(context: PageContext, filter: DeadLetterFilter): Html {
  const q = context.query;
  return html`<label>Queue <input name="queue" value="${q.get('queue') ?? ''}" maxlength="128"></label>
    <label>Type <input name="type" value="${q.get('type') ?? ''}" maxlength="128"></label>
    <label>Error name <input name="error" value="${q.get('error') ?? ''}" maxlength="200"></label>
    <label>Finished after (UTC) <input type="datetime-local" name="after" value="${timeFieldValue(filter.finishedAfter)}"></label>
    <label>Finished before (UTC) <input type="datetime-local" name="before" value="${timeFieldValue(filter.finishedBefore)}"></label>`;
}

function ids(form: URLSearchParams, max: number): string[] {
  const values = [...new Set(form.getAll('id').map((id) => id.trim().toLowerCase()))];
  if (values.length === 0) throw new DashboardHttpError(400, 'Select at least one dead letter.');
  if (values.length > max) throw new DashboardHttpError(400, `Select at most ${max} dead letters at once.`);
  if (!values.every((id) => UUID.test(id))) throw new DashboardHttpError(400, 'A selected id is not a job id.');
  return values;
}

function errorCell(job: JobSnapshot): Html {
  return html`<td><strong>${job.error?.name ?? ''}</strong> <span class="muted">${truncate(job.error?.message ?? '', 160)}</span></td>`;
}

function deadLetterRow(context: PageContext, job: JobSnapshot, selectable: boolean): Html {
  const redriven = job.redrivenTo.length > 0;
  return html`<tr>
    ${selectable && html`<td><input type="checkbox" name="id" value="${job.id}" aria-label="Select ${job.id}"${redriven ? html` disabled` : ''}></td>`}
    <td class="id"><a href="${context.href(`jobs/${job.id}`)}">${job.id}</a></td>
    <td>${job.type}</td><td>${job.queue}</td>${errorCell(job)}
    <td class="num">${job.currentAttempt}/${job.maxAttempts}</td><td>${time(job.finishedAt)}</td>
    <td>${job.redrivenTo.map((id) => html`<a class="id" href="${context.href(`jobs/${id}`)}">${id}</a> `)}</td>
  </tr>`;
}

const COLUMNS = ['Job', 'Type', 'Queue', 'Error', 'Attempts', 'Failed', 'Redriven to'];

/** The confirmation step of a redrive: what will happen, the reason, and the button that does it. */
function confirmation(context: PageContext, jobs: readonly string[], listed: Html, skipped: number): PageView {
  const count = jobs.length;
  return {
    title: 'Redrive dead letters: preview',
    body: html`<p>This is a dry run: nothing has been written. Confirming creates ${count === 1 ? 'a new job' : `${count} new jobs`} with the same
      type, queue, payload, priority, attempts, retry policy and tags, starting at attempt 1 with no checkpoints. The dead
      ${count === 1 ? 'letter stays' : 'letters stay'} failed, and both sides record the lineage with your name and reason.</p>
      ${skipped > 0 && html`<p class="notice">${skipped} of the selected jobs were left out: they are not dead letters, or were redriven before.</p>`}
      ${listed}
      ${count > 0 && changeForm(
        context,
        { route: 'dead-letters', name: 'redrive' },
        html`<input type="hidden" name="request" value="${randomUUID()}">${jobs.map((id) => html`<input type="hidden" name="id" value="${id}">`)}
          ${reasonField('why these jobs should run again')} <button type="submit" class="primary">Redrive ${count === 1 ? 'the job' : `${count} jobs`}</button>`,
      )}
      <p><a href="${context.href('dead-letters')}">Back to the dead letters</a></p>`,
  };
}

async function previewSelected(context: ActionContext): Promise<{ view: PageView }> {
  const found = await Promise.all(ids(context.form, MAX_REDRIVE).map((id) => context.admin.getJob(id)));
  const eligible = found.filter((job): job is JobSnapshot & JobLineage => job !== null && job.state === 'failed' && job.redrivenTo.length === 0);
  const rows = eligible.slice(0, PREVIEW_ROWS).map((job) => deadLetterRow(context, job, false));
  return { view: confirmation(context, eligible.map((job) => job.id), table(COLUMNS, rows, 'Nothing to redrive.'), found.length - eligible.length) };
}

async function previewAll(context: ActionContext): Promise<{ view: PageView }> {
  const filter = filterOf(context.form);
  const planned = await context.admin.redriveMany(filter, { requestId: randomUUID(), dryRun: true, limit: MAX_REDRIVE });
  const sources = planned.map((entry) => entry.sourceJobId);
  const listed = html`<p>${sources.length === MAX_REDRIVE ? `The ${MAX_REDRIVE} most recent matching dead letters` : `${sources.length} dead letters`} match${sources.length === 1 ? 'es' : ''} and were not redriven before${sources.length > PREVIEW_ROWS ? `; the first ${PREVIEW_ROWS} are listed` : ''}:</p>
    <ul class="ids">${sources.slice(0, PREVIEW_ROWS).map((id) => html`<li><a class="id" href="${context.href(`jobs/${id}`)}">${id}</a></li>`)}</ul>`;
  return { view: confirmation(context, sources, listed, 0) };
}

async function redrive(context: ActionContext): Promise<{ redirect: string } | { view: PageView }> {
  const request = context.form.get('request') ?? '';
  if (!UUID.test(request)) throw new DashboardHttpError(400, 'The form lacks its request id: start again from the preview.');
  const reason = reasonOf(context.form);
  const results: Array<{ source: string; created: string | null; error: string | null }> = [];
  for (const id of ids(context.form, MAX_REDRIVE)) {
    try {
      // The same request id per dead letter as Admin.redriveMany uses: posting the form again redrives nothing twice.
      const created = await context.admin.redrive(id, { requestId: `${request}:${id}`, actor: context.actor, reason });
      results.push({ source: id, created, error: null });
    } catch (error) {
      if (!(error instanceof WorkhorseValidationError)) throw error;
      results.push({ source: id, created: null, error: error.message });
    }
  }
  if (results.length === 1 && results[0].created !== null) {
    return { redirect: context.href(`jobs/${results[0].created}`, { notice: 'redriven' }) };
  }
  const link = (id: string) => html`<a class="id" href="${context.href(`jobs/${id}`)}">${id}</a>`;
  const rows = results.map((r) => html`<tr><td>${link(r.source)}</td><td>${r.created ? link(r.created) : html`<span class="error">${r.error}</span>`}</td></tr>`);
  const done = results.filter((r) => r.created !== null).length;
  return {
    view: {
      title: 'Redrive dead letters: done',
      body: html`<p role="status" class="notice">${done} of ${results.length} dead letters redriven.</p>${table(['Dead letter', 'New job'], rows, '')}
        <p><a href="${context.href('dead-letters')}">Back to the dead letters</a></p>`,
    },
  };
}

/** Failed jobs newest first, with redrive of one or many behind a dry run. */
export const deadLettersPage: DashboardPage = {
  route: 'dead-letters',
  nav: 'Dead letters',
  async render(context) {
    let filter: DeadLetterFilter = {};
    try {
      filter = filterOf(context.query);
      const limit = pageSize(context.query);
      const page = await context.admin.listDeadLetters({ ...filter, limit, cursor: context.query.get('cursor') ?? undefined });
      const canRedrive = await context.mayChange('redrive-job');
      const listing = table(canRedrive ? ['', ...COLUMNS] : COLUMNS, page.items.map((job) => deadLetterRow(context, job, canRedrive)), 'No dead letter matches.');
      return {
        title: 'Dead letters',
        body: html`<form method="get" action="${context.href('dead-letters')}" class="filters">${filterFields(context, filter)}
            <button type="submit">Filter</button> <a href="${context.href('dead-letters')}">Clear</a></form>
          ${canRedrive && page.items.length > 0
            ? html`${changeForm(context, { route: 'dead-letters', name: 'preview', className: 'selection' }, html`${listing}
                <button type="submit">Preview redrive of the selected</button>`)}
              ${changeForm(context, { route: 'dead-letters', name: 'preview-all' }, html`${hiddenFilter(context)}
                <button type="submit">Preview redrive of every match (up to ${MAX_REDRIVE})</button>`)}`
            : listing}
          ${pager(context, 'dead-letters', page.nextCursor, 'Next page')}`,
      };
    } catch (error) {
      if (!(error instanceof WorkhorseValidationError)) throw error;
      return { title: 'Dead letters', status: 400, body: html`<form method="get" class="filters">${filterFields(context, filter)}<button type="submit">Filter</button></form><p class="error" role="alert">${error.message}</p>` };
    }
  },
  actions: {
    preview: { action: 'redrive-job', run: previewSelected },
    'preview-all': { action: 'redrive-job', run: previewAll },
    redrive: { action: 'redrive-job', run: redrive },
  },
};

/** The current filter as hidden fields, so "every match" means what the page shows. */
function hiddenFilter(context: PageContext): Html {
  return html`${['queue', 'type', 'error', 'after', 'before'].map((name) => {
    const value = context.query.get(name);
    return value ? html`<input type="hidden" name="${name}" value="${value}">` : '';
  })}`;
}
