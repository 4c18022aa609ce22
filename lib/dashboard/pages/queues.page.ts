import { WorkhorseValidationError } from '../../core/errors';
import { describeLimits, idleQueueInfo } from '../../core/queue-info';
import { POLICY_LIMITS } from '../../core/queue-policy';
import type { QueueInfo, QueuePolicy } from '../../core/types';
import { checkName } from '../../core/validation';
import { loginRole, relative, time } from '../format';
import { html, type Html } from '../html';
import { DashboardHttpError } from '../http-request';
import { changeForm, reasonField, reasonOf, table } from '../layout';
import type { ActionContext, ActionResult, DashboardPage, PageContext } from '../page';
import { sortRows, type SortColumn } from '../sorting';
import { recentlyActiveQueues } from './overview.page';

function queueOf(form: URLSearchParams): string {
  try {
    return checkName(form.get('queue') ?? '', 'queue');
  } catch (error) {
    if (error instanceof WorkhorseValidationError) throw new DashboardHttpError(400, error.message);
    throw error;
  }
}

async function control(context: PageContext, queue: QueueInfo): Promise<Html> {
  const action = queue.paused ? 'resume-queue' : 'pause-queue';
  if (!(await context.mayChange(action))) return html``;
  return changeForm(
    context,
    { route: 'queues', name: queue.paused ? 'resume' : 'pause', className: 'change inline' },
    html`<input type="hidden" name="queue" value="${queue.queue}">${reasonField(queue.paused ? 'why it may run again' : 'why it must stop')}
      <button type="submit">${queue.paused ? 'Resume' : 'Pause'}</button>`,
  );
}

function pauseState(context: PageContext, queue: QueueInfo): Html {
  if (!queue.paused) {
    return queue.changedAt
      ? html`running <span class="muted">(resumed ${relative(queue.changedAt, context.now)}${queue.changedBy && html` by ${queue.changedBy}`}${loginRole(queue.loginRole)})</span>`
      : html`running`;
  }
  return html`<span class="health health-paused">paused</span> ${time(queue.changedAt)}${queue.changedBy && html` by <strong>${queue.changedBy}</strong>`}${loginRole(queue.loginRole)}
    ${queue.reason && html`<div class="muted">${queue.reason}</div>`}`;
}

async function limits(context: PageContext, queue: QueueInfo): Promise<Html> {
  const words = describeLimits(queue);
  const setBy = queue.policyChangedAt === null ? html``
    : html`<div class="muted">set ${time(queue.policyChangedAt)}${queue.policyChangedBy && html` by ${queue.policyChangedBy}`}${loginRole(queue.policyLoginRole)}${queue.policyReason && html`: ${queue.policyReason}`}</div>`;
  const shown = words === null ? html`<span class="muted">none</span>` : html`${words}${setBy}`;
  if (!(await context.mayChange('set-queue-limits'))) return shown;
  const number = (name: string, label: string, value: number | null | undefined, max: number) =>
    html`<label>${label} <input type="number" name="${name}" min="1" max="${max}" step="1" value="${value ?? ''}"></label>`;
  return html`${shown}<details class="row-actions"><summary>Edit limits</summary>${changeForm(
    context,
    { route: 'queues', name: 'limits' },
    html`<input type="hidden" name="queue" value="${queue.queue}">
      ${number('concurrency', 'At most active', queue.concurrency, POLICY_LIMITS.concurrency)}
      ${number('rateLimit', 'Claims per window', queue.rateLimit?.limit, POLICY_LIMITS.rateLimit)}
      ${number('intervalMs', 'Window (ms)', queue.rateLimit?.intervalMs, POLICY_LIMITS.intervalMs)}
      ${number('perKey', 'At most active per key', queue.perKey?.concurrency, POLICY_LIMITS.perKeyConcurrency)}
      <span class="muted">Empty: no such limit.</span>
      ${reasonField('why these limits')} <button type="submit">Set limits</button>`,
  )}</details>`;
}

/** An optional whole number from a limits form: null when empty, NaN (refused by the policy check, naming the field) when not a number. */
function limitOf(form: URLSearchParams, name: string): number | null {
  const text = (form.get(name) ?? '').trim();
  return text === '' ? null : Number(text);
}

/** The policy a limits form asks for; a rate limit needs both its count and its window. */
function policyOf(form: URLSearchParams): QueuePolicy {
  const concurrency = limitOf(form, 'concurrency');
  const limit = limitOf(form, 'rateLimit');
  const intervalMs = limitOf(form, 'intervalMs');
  if ((limit === null) !== (intervalMs === null)) {
    throw new DashboardHttpError(400, 'A rate limit needs both its number of claims and its window (ms); leave both empty for none.');
  }
  const perKey = limitOf(form, 'perKey');
  return {
    concurrency,
    rateLimit: limit === null || intervalMs === null ? null : { limit, intervalMs },
    perKey: perKey === null ? null : { concurrency: perKey },
  };
}

async function setLimits(context: ActionContext): Promise<ActionResult> {
  const queue = queueOf(context.form);
  await context.admin.setQueuePolicy(queue, policyOf(context.form), { actor: context.actor, reason: reasonOf(context.form) });
  return { redirect: context.href('queues', { notice: 'limits-set' }) };
}

function change(verb: 'pause' | 'resume'): (context: ActionContext) => Promise<ActionResult> {
  return async (context) => {
    const queue = queueOf(context.form);
    const options = { actor: context.actor, reason: reasonOf(context.form) };
    await (verb === 'pause' ? context.admin.pauseQueue(queue, options) : context.admin.resumeQueue(queue, options));
    return { redirect: context.href('queues', { notice: verb === 'pause' ? 'paused' : 'resumed' }) };
  };
}

const count = (label: string, value: (queue: QueueInfo) => number): SortColumn<QueueInfo> => ({ key: label.toLowerCase(), label, value, firstDir: 'desc' });

/** The queues page's columns; sorted in memory (the page holds every queue). */
const QUEUE_COLUMNS: ReadonlyArray<SortColumn<QueueInfo> | string> = [
  { key: 'queue', label: 'Queue', value: (queue) => queue.queue },
  { key: 'state', label: 'State', value: (queue) => (queue.paused ? 'paused' : 'running') },
  'Limits',
  count('Blocked', (queue) => queue.blocked),
  count('Scheduled', (queue) => queue.scheduled),
  count('Ready', (queue) => queue.ready),
  count('Active', (queue) => queue.active),
  '',
];

/**
 * Queues: paused or running (who changed it, when and why), live jobs, and pause or resume.
 * Flow-control limits (concurrency, rate, per key) in a column of their own, with a form to change them.
 */
export const queuesPage: DashboardPage = {
  route: 'queues',
  live: true,
  nav: 'Queues',
  async render(context) {
    const [listed, active] = await Promise.all([context.admin.listQueues(), recentlyActiveQueues(context)]);
    const known = new Set(listed.map((queue) => queue.queue));
    const idle = active.filter((name) => !known.has(name)).map(idleQueueInfo);
    const { rows: queues, head } = sortRows(context, 'queues', [...listed, ...idle].sort((a, b) => a.queue.localeCompare(b.queue)), QUEUE_COLUMNS);
    const rows = await Promise.all(
      queues.map(
        async (queue) => html`<tr>
          <td><a href="${context.href('jobs', { queue: queue.queue })}">${queue.queue}</a></td>
          <td>${pauseState(context, queue)}</td>
          <td>${await limits(context, queue)}</td>
          <td class="num">${queue.blocked}</td><td class="num">${queue.scheduled}</td><td class="num">${queue.ready}</td><td class="num">${queue.active}</td>
          <td>${await control(context, queue)}</td>
        </tr>`,
      ),
    );
    return {
      title: 'Queues',
      body: html`${table(head, rows, 'No queue has jobs yet.')}
        <p class="muted">Pausing stops workers from claiming the queue's jobs; running jobs finish, and enqueueing goes on.
        Limits hold across all workers from the next claim; an application that sets them at start (<code>WorkhorseModule.forRoot({ queues })</code>) sets them again when it restarts.
        Queues appear here while they have live jobs, finished jobs in the last 24 hours, or a pause record.</p>`,
    };
  },
  actions: {
    pause: { action: 'pause-queue', run: change('pause') },
    resume: { action: 'resume-queue', run: change('resume') },
    limits: { action: 'set-queue-limits', run: setLimits },
  },
};
