import { WorkhorseValidationError } from '../../core/errors';
import { JobActionRefusedError } from '../../core/job-action-errors';
import type { CheckpointEntry, JobLineage, JobSnapshot, TimelineEntry } from '../../core/types';
import { inlineData, jsonBlock, redacted, relative, stateBadge, time, truncate } from '../format';
import { html, type Html, type HtmlValue } from '../html';
import { DashboardHttpError } from '../http-request';
import { changeForm, reasonField, reasonOf, table } from '../layout';
import type { ActionContext, ActionResult, DashboardPage, PageContext, PageView } from '../page';
import { family } from './job-family';
import type { JobSection } from './job-section';
import { signalsAndWaits } from './job-signals-waits';
import { shownLoginRole } from '../../core/timeline';

const TIMELINE_PAGE = 100;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The job a route names, or a 404 view. */
export async function jobOrNotFound(context: PageContext): Promise<(JobSnapshot & JobLineage) | PageView> {
  const id = context.params.id;
  const job = UUID.test(id) ? await context.admin.getJob(id.toLowerCase()) : null;
  return job ?? { title: 'Job not found', status: 404, body: html`<p>No job has the id <code>${id}</code>.</p>` };
}


function summary({ context, job }: JobSection): Html {
  const row = (label: string, value: HtmlValue) => html`<dt>${label}</dt><dd>${value ?? html`<span class="muted">-</span>`}</dd>`;
  return html`<dl class="summary">
    ${row('State', stateBadge(job.state))}
    ${row('Type', job.type)}
    ${row('Queue', html`<a href="${context.href('jobs', { queue: job.queue })}">${job.queue}</a>`)}
    ${row('Priority', job.priority)}
    ${row('Attempt', `${job.currentAttempt} of ${job.maxAttempts}`)}
    ${row('Created', time(job.createdAt))}
    ${row(job.finishedAt ? 'Last run at' : 'Runs at', html`${time(job.runAt)} <span class="muted">(${relative(job.runAt, context.now)})</span>`)}
    ${job.finishedAt && row('Finished', time(job.finishedAt))}
    ${job.workerId && row('Worker', html`<code>${job.workerId}</code>, lease until ${time(job.leaseExpiresAt)}`)}
    ${job.cancelRequestedAt && row('Cancel requested', time(job.cancelRequestedAt))}
    ${job.deadline && row('Deadline', time(job.deadline))}
    ${job.executionTimeoutMs !== null && row('Attempt timeout', `${job.executionTimeoutMs} ms`)}
    ${job.concurrencyKey !== null && row('Concurrency key', html`<code>${job.concurrencyKey}</code>`)}
    ${job.tags.length > 0 && row('Tags', job.tags.map((tag) => html`<span class="tag">${tag}</span> `))}
    ${row('Retry policy', job.retryPolicy ? JSON.stringify(job.retryPolicy) : 'the handler\u2019s or the default')}
  </dl>`;
}

const LIVE_STATES: ReadonlySet<JobSnapshot['state']> = new Set(['blocked', 'scheduled', 'ready', 'active']);

async function actions({ context, job }: JobSection): Promise<Html> {
  const forms: Html[] = [];
  if (job.state === 'failed' && (await context.mayChange('redrive-job'))) {
    forms.push(changeForm(
      context,
      { route: 'dead-letters', name: 'preview' },
      html`<input type="hidden" name="id" value="${job.id}"><button type="submit">Redrive…</button>`,
    ));
  }
  if (job.state === 'scheduled' && (await context.mayChange('run-job-now'))) {
    forms.push(changeForm(context, { route: `jobs/${job.id}`, name: 'run-now' }, html`${reasonField('why it should run now')} <button type="submit">Run now</button>`));
  }
  if (LIVE_STATES.has(job.state) && job.cancelRequestedAt === null && (await context.mayChange('cancel-job'))) {
    const running = job.state === 'active';
    forms.push(changeForm(
      context,
      { route: `jobs/${job.id}`, name: 'cancel', confirm: running ? 'Ask the worker to stop this job and cancel it?' : 'Cancel this job? It will never run.' },
      html`${reasonField('why this job must not run')} <button type="submit">Cancel job</button>`,
    ));
  }
  if (!LIVE_STATES.has(job.state) && (await context.mayChange('delete-job'))) {
    forms.push(changeForm(
      context,
      { route: `jobs/${job.id}`, name: 'delete', confirm: 'Delete this job and what references it? This cannot be undone.' },
      html`${reasonField('why this job should go')} <button type="submit">Delete job</button>`,
    ));
  }
  return forms.length === 0 ? html`` : html`<section class="actions">${forms}</section>`;
}

/** Run now and delete of the job page; a state the action does not apply to is a 409 naming it. */
function jobAction(kind: 'run-now' | 'delete'): (context: ActionContext) => Promise<ActionResult> {
  return async (context) => {
    const id = context.params.id.toLowerCase();
    if (!UUID.test(id)) throw new DashboardHttpError(404, 'There is no such job.');
    const who = { actor: context.actor, reason: reasonOf(context.form) };
    try {
      const status = kind === 'run-now' ? await context.admin.runNow(id, who) : await context.admin.deleteJob(id, who);
      if (status === 'not_found') throw new DashboardHttpError(404, 'There is no such job.');
      return kind === 'delete' ? { redirect: context.href('jobs', { notice: 'deleted' }) } : { redirect: context.href(`jobs/${id}`, { notice: 'ran-now' }) };
    } catch (error) {
      if (error instanceof JobActionRefusedError) throw new DashboardHttpError(409, error.message);
      throw error;
    }
  };
}

const CANCEL_NOTICES = { canceled: 'canceled', cancel_requested: 'cancel-requested', already_terminal: 'already-terminal' } as const;

async function cancel(context: ActionContext): Promise<ActionResult> {
  const id = context.params.id;
  if (!UUID.test(id)) throw new DashboardHttpError(404, 'There is no such job.');
  const status = await context.admin.cancel(id.toLowerCase(), { actor: context.actor, reason: reasonOf(context.form) });
  if (status === 'not_found') throw new DashboardHttpError(404, 'There is no such job.');
  return { redirect: context.href(`jobs/${id}`, { notice: CANCEL_NOTICES[status] }) };
}

function failure({ job }: JobSection): Html {
  if (!job.error) return html``;
  const heading = job.state === 'failed' || job.state === 'canceled' ? 'Error' : 'Last attempt\u2019s error';
  // A cancellation envelope names who canceled, when an actor was given (Admin.cancel).
  const actor = (job.error as { actor?: unknown }).actor;
  return html`<section><h2>${heading}</h2>
    <p><strong>${job.error.name}</strong>${typeof actor === 'string' && html` by <strong>${actor}</strong>`}</p>
    <pre class="message">${truncate(job.error.message, 16_384)}</pre>
    ${job.error.stack && html`<details><summary>Stack</summary><pre>${truncate(job.error.stack, 65_536)}</pre></details>`}
  </section>`;
}

function jobData({ context, job, data }: JobSection): Html {
  const part = (title: string, value: JobSnapshot['payload'] | null, file: string) =>
    html`<h3>${title}</h3>${data ? jsonBlock(value, context.href(`jobs/${job.id}/${file}`)) : redacted(title)}`;
  return html`<section><h2>Data</h2>
    ${part('Payload', job.payload, 'payload.json')}
    ${job.state === 'succeeded' && part('Result', job.result, 'result.json')}
    ${job.progress !== null && part('Progress', job.progress, 'progress.json')}
  </section>`;
}

async function checkpoints({ context, job, data }: JobSection): Promise<Html> {
  const entries: CheckpointEntry[] = await context.admin.listCheckpoints(job.id);
  if (entries.length === 0) return html``;
  const rows = entries.map(
    (entry) => html`<tr><td>${entry.name}</td><td class="num">${entry.attempt}</td><td><code>${entry.workerId}</code></td><td>${time(entry.createdAt)}</td>
      <td>${data ? html`<pre class="json small">${truncate(JSON.stringify(entry.value), 2048)}</pre>` : html`<span class="redacted">hidden</span>`}</td></tr>`,
  );
  return html`<section><h2>Checkpoints</h2>${table(['Name', 'Attempt', 'Worker', 'Saved', 'Value'], rows, '')}</section>`;
}

function lineage({ context, job }: JobSection): Html {
  if (job.redrivenFrom === null && job.redrivenTo.length === 0) return html``;
  const link = (id: string) => html`<a class="id" href="${context.href(`jobs/${id}`)}">${id}</a>`;
  return html`<section><h2>Lineage</h2><ul>
    ${job.redrivenFrom && html`<li>Redriven from ${link(job.redrivenFrom)}</li>`}
    ${job.redrivenTo.map((id) => html`<li>Redriven to ${link(id)}</li>`)}
  </ul></section>`;
}

/** Keys of timeline data that hold the application's data (signal payloads, a human wait's context and decision). */
const DATA_KEYS = ['payload', 'context', 'decision'];

function entryDetails(context: PageContext, entry: TimelineEntry, shown: boolean): Html {
  const data = entry.data ?? {};
  const visible = shown ? entry.data : entry.data && Object.fromEntries(Object.entries(entry.data).map(([key, v]) => [key, DATA_KEYS.includes(key) && v !== null ? '(hidden)' : v]));
  const linked = ['newJobId', 'sourceJobId']
    .map((key) => data[key])
    .filter((value): value is string => typeof value === 'string' && UUID.test(value))
    .map((id) => html` <a class="id" href="${context.href(`jobs/${id}`)}">${id}</a>`);
  const role = shownLoginRole(entry);
  return html`${inlineData(visible)}${linked}${role === null ? '' : html` <span class="login-role">login role <code>${role}</code></span>`}`;
}

async function timeline({ context, job, data }: JobSection): Promise<Html> {
  const cursor = context.query.get('timeline') ?? undefined;
  const page = await context.admin.getJobTimeline(job.id, { limit: TIMELINE_PAGE, cursor });
  const rows = page.items.map(
    (entry) => html`<tr class="source-${entry.source}"><td>${time(entry.at)}</td><td>${entry.source === 'attempt' ? `attempt ${entry.kind}` : entry.kind}</td>
      <td class="num">${entry.attempt ?? ''}</td><td>${entry.workerId && html`<code>${entry.workerId}</code>`}</td><td class="num">${entry.fenceToken ?? ''}</td>
      <td class="details">${entryDetails(context, entry, data)}</td></tr>`,
  );
  return html`<section><h2>Timeline</h2>
    ${table(['At', 'What', 'Attempt', 'Worker', 'Fence', 'Details'], rows, 'No history (it may have been retired by retention).')}
    <nav class="pager">
      ${cursor && html`<a href="${context.href(`jobs/${job.id}`)}">First entries</a>`}
      ${page.nextCursor && html`<a href="${context.href(`jobs/${job.id}`, { timeline: page.nextCursor })}">Later entries</a>`}
    </nav></section>`;
}

/** The sections of the job page, in order; each is one function (orchestration's in files of their own). */
const SECTIONS: ReadonlyArray<(section: JobSection) => Html | Promise<Html>> = [
  summary,
  actions,
  failure,
  jobData,
  checkpoints,
  lineage,
  family,
  signalsAndWaits,
  timeline,
];

/**
 * One job: its definition and state, error, data (when allowed), checkpoints, lineage of
 * redrives, dependencies and children, signals and waits (deciding an open human wait), timeline.
 */
export const jobPage: DashboardPage = {
  route: 'jobs/:id',
  live: true,
  actions: {
    cancel: { action: 'cancel-job', run: cancel },
    'run-now': { action: 'run-job-now', run: jobAction('run-now') },
    delete: { action: 'delete-job', run: jobAction('delete') },
  },
  async render(context) {
    const found = await jobOrNotFound(context);
    if (!('id' in found)) return found;
    const section: JobSection = { context, job: found, data: await context.can('read-data') };
    try {
      const parts = await Promise.all(SECTIONS.map((render) => render(section)));
      return { title: `${found.type} ${found.id}`, body: html`${parts}` };
    } catch (error) {
      if (!(error instanceof WorkhorseValidationError)) throw error;
      return { title: 'Job', status: 400, body: html`<p class="error">${error.message}</p>` };
    }
  },
};

const FILES = { 'payload.json': 'payload', 'result.json': 'result', 'progress.json': 'progress' } as const;

/** A job's payload, result or progress as a JSON file, for values too long to show inline. */
export const jobDataPage: DashboardPage = {
  route: 'jobs/:id/:file',
  async render(context) {
    const file = context.params.file;
    if (!Object.hasOwn(FILES, file)) return { title: 'Not found', status: 404, body: html`<p>No such page.</p>` };
    if (!(await context.can('read-data'))) {
      return { title: 'Not allowed', status: 403, body: redacted('The job\u2019s data') };
    }
    const found = await jobOrNotFound(context);
    if (!('id' in found)) return found;
    const value = found[FILES[file as keyof typeof FILES]];
    return { file: { name: `${found.id}-${file}`, contentType: 'application/json', body: JSON.stringify(value, null, 2) } };
  },
};
