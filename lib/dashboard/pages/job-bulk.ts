import { WorkhorseValidationError } from '../../core/errors';
import type { BulkActionResult, JobActionFilter } from '../../core/job-actions';
import { time } from '../format';
import { html, type Html } from '../html';
import { DashboardHttpError } from '../http-request';
import { changeForm, reasonField, reasonOf, table } from '../layout';
import type { DashboardAction } from '../dashboard-actions';
import type { ActionContext, ActionResult, PageAction, PageContext, PageView } from '../page';
import { optionalName, optionalText, optionalTime, states } from './listing';

// Bulk actions of the jobs page: on the rows ticked, or on every job that matches the filter.
// A preview (a dry run: Admin.cancelMatching & co. with dryRun) shows how many jobs would change
// and the first ones; confirming with a reason runs the action, at most MAX_BULK jobs a
// confirmation (oldest first), and offers to run it again while more match. Which jobs an
// action applies to, and what it leaves alone, is the SQL functions' rule.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** At most this many jobs change per confirmation (the functions' bound). */
export const MAX_BULK = 1000;

type Verb = 'cancel' | 'run-now' | 'delete';

const VERBS: Record<Verb, { action: DashboardAction; label: string; done: string; note: string }> = {
  cancel: { action: 'cancel-job', label: 'Cancel', done: 'canceled', note: 'A running job is asked to stop (its worker aborts the handler); any other live job ends canceled at once.' },
  'run-now': { action: 'run-job-now', label: 'Run now', done: 'made ready', note: 'Scheduled, retrying and sleeping jobs become ready at once; running, blocked and waiting jobs are left alone.' },
  delete: { action: 'delete-job', label: 'Delete', done: 'deleted', note: 'Finished jobs are deleted with what references them, as retention would; live jobs and jobs a live job still references are left alone.' },
};

function verbOf(form: URLSearchParams): Verb {
  const verb = form.get('verb');
  if (verb !== 'cancel' && verb !== 'run-now' && verb !== 'delete') throw new DashboardHttpError(400, 'Choose an action: cancel, run now or delete.');
  return verb;
}

/** The actions the viewer may take (none in a read-only dashboard), for the controls of the listing. */
export async function bulkVerbs(context: PageContext): Promise<Verb[]> {
  const allowed: Verb[] = [];
  for (const verb of Object.keys(VERBS) as Verb[]) if (await context.mayChange(VERBS[verb].action)) allowed.push(verb);
  return allowed;
}

function verbSelect(verbs: readonly Verb[]): Html {
  return html`<label>Action <select name="verb">${verbs.map((verb) => html`<option value="${verb}">${VERBS[verb].label}</option>`)}</select></label>`;
}

/** The listing wrapped in the selection form, and the "every match" form under it. */
export function bulkControls(context: PageContext, verbs: readonly Verb[], listing: Html, searching: boolean): Html {
  const hidden = ['queue', 'type', 'after', 'before', 'tag', 'parent']
    .map((name) => context.query.get(name))
    .some((value) => value) || context.query.getAll('state').length > 0;
  return html`${changeForm(context, { route: 'jobs', name: 'preview', className: 'selection' }, html`${listing}
      <p class="bulk">${verbSelect(verbs)} <button type="submit" name="scope" value="selected">Preview for the selected</button></p>`)}
    ${searching
      ? html`<p class="muted">A search by payload or error acts on the rows you select; "every match" takes queue, type, state, tag and creation time.</p>`
      : changeForm(context, { route: 'jobs', name: 'preview-all', className: 'bulk-all' }, html`${hiddenFilter(context)}
          ${verbSelect(verbs)} <button type="submit">Preview for ${hidden ? 'all that match' : 'every job'}</button>`)}`;
}

function hiddenFilter(context: PageContext): Html {
  return html`${['queue', 'type', 'after', 'before', 'tag'].map((name) => {
    const value = context.query.get(name);
    return value ? html`<input type="hidden" name="${name}" value="${value}">` : '';
  })}${context.query.getAll('state').map((state) => html`<input type="hidden" name="state" value="${state}">`)}`;
}

/** The filter an "every match" form posted (the listing's own fields). */
function matchFilter(form: URLSearchParams): JobActionFilter {
  const filter: JobActionFilter = {
    queue: optionalName(form, 'queue'),
    type: optionalName(form, 'type'),
    states: states(form),
    tag: optionalText(form, 'tag', 200),
    createdAfter: optionalTime(form, 'after'),
    createdBefore: optionalTime(form, 'before'),
  };
  return Object.fromEntries(Object.entries(filter).filter(([, value]) => value !== undefined)) as JobActionFilter;
}

function selectedFilter(form: URLSearchParams): JobActionFilter {
  const ids = [...new Set(form.getAll('id').map((id) => id.trim().toLowerCase()))];
  if (ids.length === 0) throw new DashboardHttpError(400, 'Select at least one job.');
  if (ids.length > MAX_BULK) throw new DashboardHttpError(400, `Select at most ${MAX_BULK} jobs at once.`);
  if (!ids.every((id) => UUID.test(id))) throw new DashboardHttpError(400, 'A selected id is not a job id.');
  return { jobIds: ids };
}

function run(context: ActionContext, verb: Verb, filter: JobActionFilter, options: { dryRun: boolean; actor?: string; reason?: string }): Promise<BulkActionResult> {
  const opts = { ...options, limit: MAX_BULK };
  if (verb === 'cancel') return context.admin.cancelMatching(filter, opts);
  if (verb === 'run-now') return context.admin.runNowMatching(filter, opts);
  return context.admin.deleteMatching(filter, opts);
}

function jobs(count: number): string {
  return count === 1 ? '1 job' : `${count.toLocaleString('en')} jobs`;
}

function leftAlone(result: BulkActionResult): Html {
  const parts = Object.entries(result.skipped).map(([state, n]) => `${n} ${state}`);
  if (result.busy > 0) parts.push(`${result.busy} busy (a worker was writing it just then; looked at again next time)`);
  return parts.length === 0 ? html`` : html`<p class="notice" id="bulk-skipped">Left alone: ${parts.join(', ')}.</p>`;
}

/** The form that runs the action: the filter travels as JSON (the database checks it again), the reason is required. */
function confirmForm(context: PageContext, verb: Verb, filter: JobActionFilter, label: string): Html {
  return changeForm(
    context,
    { route: 'jobs', name: `bulk-${verb}` },
    html`<input type="hidden" name="filter" value="${JSON.stringify(filter)}">
      ${reasonField('why, recorded with every job')} <button type="submit" class="primary">${label}</button>`,
  );
}

async function preview(context: ActionContext, filter: JobActionFilter): Promise<{ view: PageView }> {
  const verb = verbOf(context.form);
  if (!(await context.mayChange(VERBS[verb].action))) throw new DashboardHttpError(403, `You may not ${VERBS[verb].label.toLowerCase()} jobs here.`);
  const result = await run(context, verb, filter, { dryRun: true });
  const rows = result.sample.map((s) => html`<tr><td class="id"><a href="${context.href(`jobs/${s.id}`)}">${s.id}</a></td><td>${s.type}</td><td>${s.queue}</td><td>${s.state}</td><td>${time(s.createdAt)}</td></tr>`);
  const count = result.matched;
  return {
    view: {
      title: `${VERBS[verb].label}: preview`,
      body: html`<p id="bulk-count" data-matched="${count}">This is a dry run: nothing has been written. ${count === 0 ? 'No job matches that this action applies to.' : html`${result.capped ? 'More than ' : ''}${jobs(count)} would be ${VERBS[verb].done}.`}</p>
        <p class="muted">${VERBS[verb].note}</p>
        ${leftAlone(result)}
        ${count > 0 && html`${table(['Job', 'Type', 'Queue', 'State', 'Created'], rows, '')}
          ${count > result.sample.length && html`<p class="muted">The first ${result.sample.length} are listed.</p>`}
          ${count > MAX_BULK && html`<p class="notice">One confirmation changes at most ${MAX_BULK.toLocaleString('en')} jobs, the oldest first; the result offers to go on with the rest.</p>`}
          ${confirmForm(context, verb, filter, `${VERBS[verb].label} ${count > MAX_BULK ? `the first ${MAX_BULK.toLocaleString('en')}` : jobs(count)}`)}`}
        <p><a href="${context.href('jobs')}">Back to the jobs</a></p>`,
    },
  };
}

function apply(verb: Verb): (context: ActionContext) => Promise<ActionResult> {
  return async (context) => {
    let filter: JobActionFilter;
    try {
      filter = JSON.parse(context.form.get('filter') ?? '') as JobActionFilter;
    } catch {
      throw new DashboardHttpError(400, 'The form lacks its filter: start again from the preview.');
    }
    const reason = reasonOf(context.form);
    let result: BulkActionResult;
    try {
      result = await run(context, verb, filter, { dryRun: false, actor: context.actor, reason });
    } catch (error) {
      if (error instanceof WorkhorseValidationError) throw new DashboardHttpError(400, error.message);
      throw error;
    }
    const outcomes = Object.entries(result.outcomes).map(([outcome, n]) => `${n} ${outcome.replace('_', ' ')}`);
    return {
      view: {
        title: `${VERBS[verb].label}: done`,
        body: html`<p role="status" class="notice" id="bulk-done" data-changed="${result.changed}">${jobs(result.changed)} ${VERBS[verb].done}${outcomes.length > 0 ? ` (${outcomes.join(', ')})` : ''}, recorded with your name and reason.</p>
          ${leftAlone(result)}
          ${result.more && html`<p>More jobs match.</p>${confirmForm(context, verb, filter, `${VERBS[verb].label} the next ones`)}`}
          <p><a href="${context.href('jobs')}">Back to the jobs</a></p>`,
      },
    };
  };
}

/**
 * The jobs page's bulk actions. A preview writes nothing, so it asks `authorize` for `read` and
 * then checks the action it previews itself; each confirmation asks for its own action.
 */
export const BULK_ACTIONS: Readonly<Record<string, PageAction>> = {
  preview: { action: 'read', run: (context) => preview(context, selectedFilter(context.form)) },
  'preview-all': { action: 'read', run: (context) => preview(context, matchFilter(context.form)) },
  'bulk-cancel': { action: 'cancel-job', run: apply('cancel') },
  'bulk-run-now': { action: 'run-job-now', run: apply('run-now') },
  'bulk-delete': { action: 'delete-job', run: apply('delete') },
};
