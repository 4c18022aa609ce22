import { WorkhorseValidationError } from '../../core/errors';
import { describeLimits, idleQueueInfo } from '../../core/queue-info';
import type { QueueInfo } from '../../core/types';
import { checkName } from '../../core/validation';
import { relative, time } from '../format';
import { html, type Html } from '../html';
import { DashboardHttpError } from '../http-request';
import { changeForm, reasonField, reasonOf, table } from '../layout';
import type { ActionContext, ActionResult, DashboardPage, PageContext } from '../page';
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
      ? html`running <span class="muted">(resumed ${relative(queue.changedAt, context.now)}${queue.changedBy && html` by ${queue.changedBy}`})</span>`
      : html`running`;
  }
  return html`<span class="health health-paused">paused</span> ${time(queue.changedAt)}${queue.changedBy && html` by <strong>${queue.changedBy}</strong>`}
    ${queue.reason && html`<div class="muted">${queue.reason}</div>`}`;
}

function limits(queue: QueueInfo): Html {
  const words = describeLimits(queue);
  return words === null ? html`<span class="muted">none</span>` : html`${words}`;
}

function change(verb: 'pause' | 'resume'): (context: ActionContext) => Promise<ActionResult> {
  return async (context) => {
    const queue = queueOf(context.form);
    const options = { actor: context.actor, reason: reasonOf(context.form) };
    await (verb === 'pause' ? context.admin.pauseQueue(queue, options) : context.admin.resumeQueue(queue, options));
    return { redirect: context.href('queues', { notice: verb === 'pause' ? 'paused' : 'resumed' }) };
  };
}

/**
 * Queues: paused or running (who changed it, when and why), live jobs, and pause or resume.
 * Flow-control limits (concurrency, rate) in a column of their own.
 */
export const queuesPage: DashboardPage = {
  route: 'queues',
  nav: 'Queues',
  async render(context) {
    const [listed, active] = await Promise.all([context.admin.listQueues(), recentlyActiveQueues(context)]);
    const known = new Set(listed.map((queue) => queue.queue));
    const idle = active.filter((name) => !known.has(name)).map(idleQueueInfo);
    const queues = [...listed, ...idle].sort((a, b) => a.queue.localeCompare(b.queue));
    const rows = await Promise.all(
      queues.map(
        async (queue) => html`<tr>
          <td><a href="${context.href('jobs', { queue: queue.queue })}">${queue.queue}</a></td>
          <td>${pauseState(context, queue)}</td>
          <td>${limits(queue)}</td>
          <td class="num">${queue.blocked}</td><td class="num">${queue.scheduled}</td><td class="num">${queue.ready}</td><td class="num">${queue.active}</td>
          <td>${await control(context, queue)}</td>
        </tr>`,
      ),
    );
    return {
      title: 'Queues',
      body: html`${table(['Queue', 'State', 'Limits', 'Blocked', 'Scheduled', 'Ready', 'Active', ''], rows, 'No queue has jobs yet.')}
        <p class="muted">Pausing stops workers from claiming the queue's jobs; running jobs finish, and enqueueing goes on.
        Queues appear here while they have live jobs, finished jobs in the last 24 hours, or a pause record.</p>`,
    };
  },
  actions: {
    pause: { action: 'pause-queue', run: change('pause') },
    resume: { action: 'resume-queue', run: change('resume') },
  },
};
