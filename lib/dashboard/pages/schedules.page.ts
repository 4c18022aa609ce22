import { ScheduleNotFoundError, WorkhorseValidationError } from '../../core/errors';
import type { ScheduleHistoryEntry, ScheduleInfo } from '../../core/schedules/types';
import { checkName } from '../../core/validation';
import { loginRole, stateBadge, time, truncate } from '../format';
import { html, type Html } from '../html';
import { DashboardHttpError } from '../http-request';
import { changeForm, reasonField, reasonOf, table } from '../layout';
import type { ActionContext, ActionResult, DashboardPage, PageContext } from '../page';

/** How much of a schedule's payload a row shows (with `read-data`). */
const PAYLOAD_CHARS = 300;
const HISTORY_ENTRIES = 100;
/** Where a schedule's jobs go when its options name no queue (as for any job). */
const DEFAULT_QUEUE = 'default';

/** The schedule a form or a link names: its namespace and key, checked as names. */
function scheduleOf(source: URLSearchParams): { namespace: string; key: string } {
  try {
    return { namespace: checkName(source.get('namespace') ?? '', 'namespace'), key: checkName(source.get('key') ?? '', 'key') };
  } catch (error) {
    if (error instanceof WorkhorseValidationError) throw new DashboardHttpError(400, error.message);
    throw error;
  }
}

function scheduleFields(schedule: Pick<ScheduleInfo, 'namespace' | 'key'>): Html {
  return html`<input type="hidden" name="namespace" value="${schedule.namespace}"><input type="hidden" name="key" value="${schedule.key}">`;
}

function stateCell(schedule: ScheduleInfo): Html {
  if (schedule.state === 'paused') {
    return html`<span class="health health-paused">paused</span> ${time(schedule.pausedAt)}${schedule.pausedBy && html` by <strong>${schedule.pausedBy}</strong>`}
      ${schedule.pauseReason && html`<div class="muted">${schedule.pauseReason}</div>`}`;
  }
  if (schedule.state === 'disabled') return html`<span class="muted" title="A sync of its namespace no longer lists it">disabled</span>`;
  return html`<span class="health health-ok">active</span>`;
}

function jobCell(context: PageContext, schedule: ScheduleInfo, data: boolean): Html {
  const payload = JSON.stringify(schedule.payload);
  const queue = schedule.options.queue ?? DEFAULT_QUEUE;
  return html`<strong>${schedule.type}</strong> on <a href="${context.href('jobs', { queue })}">${queue}</a>
    <div>${data ? html`<code class="small">${truncate(payload, PAYLOAD_CHARS)}</code>` : html`<span class="redacted">payload hidden</span>`}</div>`;
}

function lastCell(context: PageContext, schedule: ScheduleInfo): Html {
  return html`${time(schedule.lastRunAt)}
    ${schedule.lastJobId && html`<div><a class="id" href="${context.href(`jobs/${schedule.lastJobId}`)}">${schedule.lastJobId}</a>
      ${schedule.lastJobState && stateBadge(schedule.lastJobState)}</div>`}
    ${schedule.lastError && html`<div class="error" title="${schedule.lastError}">${truncate(schedule.lastError, 200)} (${time(schedule.lastErrorAt)})</div>`}`;
}

async function controls(context: PageContext, schedule: ScheduleInfo): Promise<Html> {
  if (schedule.state === 'disabled') return html``;
  // Each change in a column of its own under one summary, so that the table fits a screen.
  const forms: Html[] = [];
  const verb = schedule.state === 'paused' ? 'resume' : 'pause';
  if (await context.mayChange(verb === 'pause' ? 'pause-schedule' : 'resume-schedule')) {
    forms.push(
      changeForm(
        context,
        { route: 'schedules', name: verb },
        html`${scheduleFields(schedule)}${reasonField(verb === 'pause' ? 'why it must not fire' : 'why it may fire again')}
          <button type="submit">${verb === 'pause' ? 'Pause' : 'Resume'}</button>`,
      ),
    );
  }
  if (await context.mayChange('trigger-schedule')) {
    forms.push(
      changeForm(
        context,
        { route: 'schedules', name: 'trigger' },
        html`${scheduleFields(schedule)}${reasonField('why it must run now')} <button type="submit">Trigger now</button>`,
      ),
    );
  }
  return forms.length === 0 ? html`` : html`<details class="row-actions"><summary>${verb === 'pause' ? 'Pause' : 'Resume'}, trigger…</summary>${forms}</details>`;
}

function change(verb: 'pause' | 'resume'): (context: ActionContext) => Promise<ActionResult> {
  return async (context) => {
    const { namespace, key } = scheduleOf(context.form);
    const options = { namespace, actor: context.actor, reason: reasonOf(context.form) };
    const changed = await notFoundAs404(() => (verb === 'pause' ? context.admin.pauseSchedule(key, options) : context.admin.resumeSchedule(key, options)));
    return { redirect: context.href('schedules', { notice: changed ? `schedule-${verb === 'pause' ? 'paused' : 'resumed'}` : 'schedule-unchanged' }) };
  };
}

async function trigger(context: ActionContext): Promise<ActionResult> {
  const { namespace, key } = scheduleOf(context.form);
  const jobId = await notFoundAs404(() => context.admin.triggerSchedule(key, { namespace, actor: context.actor, reason: reasonOf(context.form) }));
  return { redirect: context.href(`jobs/${jobId}`, { notice: 'triggered' }) };
}

async function notFoundAs404<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof ScheduleNotFoundError) throw new DashboardHttpError(404, 'There is no such schedule (its namespace may have been synced without it).');
    throw error;
  }
}

/**
 * Cron schedules: what each enqueues and when (next and last occurrence, the last job and its
 * state), paused or not (by whom, why); pause, resume and trigger now, each with a reason.
 */
export const schedulesPage: DashboardPage = {
  route: 'schedules',
  nav: 'Schedules',
  async render(context) {
    const [schedules, data] = await Promise.all([context.admin.listSchedules(), context.can('read-data')]);
    const rows = await Promise.all(
      schedules.map(
        async (schedule) => html`<tr>
          <td><a href="${context.href('schedule', { namespace: schedule.namespace, key: schedule.key })}">${schedule.key}</a>
            <div class="muted">${schedule.namespace}</div></td>
          <td><code>${schedule.cron}</code> <span class="muted">${schedule.timezone}</span></td>
          <td>${jobCell(context, schedule, data)}</td>
          <td>${stateCell(schedule)}</td>
          <td>${time(schedule.nextRunAt)}</td>
          <td>${lastCell(context, schedule)}</td>
          <td>${await controls(context, schedule)}</td>
        </tr>`,
      ),
    );
    return {
      title: 'Schedules',
      body: html`${table(['Schedule', 'Cron', 'Enqueues', 'State', 'Next', 'Last', ''], rows, 'No schedule is defined (queue.syncSchedules, or the Nest module\u2019s schedules).')}
        <p class="muted">Pausing skips a schedule\u2019s occurrences until it is resumed (nothing missed meanwhile is caught up); triggering
        enqueues its job now, also while paused. Each change is recorded in the schedule\u2019s history with your name and reason.</p>`,
    };
  },
  actions: {
    pause: { action: 'pause-schedule', run: change('pause') },
    resume: { action: 'resume-schedule', run: change('resume') },
    trigger: { action: 'trigger-schedule', run: trigger },
  },
};

function historyRow(context: PageContext, entry: ScheduleHistoryEntry): Html {
  return html`<tr><td>${time(entry.at)}</td><td class="num">${entry.revision}</td><td>${entry.change}</td>
    <td>${entry.actor ?? html`<span class="muted">-</span>`}${loginRole(entry.loginRole)}</td><td>${entry.reason ?? ''}</td>
    <td>${entry.jobId && html`<a class="id" href="${context.href(`jobs/${entry.jobId}`)}">${entry.jobId}</a>`}</td></tr>`;
}

/** One schedule's history, newest first: each revision's change and each trigger, with actor and reason. */
export const scheduleHistoryPage: DashboardPage = {
  route: 'schedule',
  async render(context) {
    const { namespace, key } = scheduleOf(context.query);
    const entries = await notFoundAs404(() => context.admin.getScheduleHistory(key, { namespace, limit: HISTORY_ENTRIES }));
    return {
      title: `Schedule ${key}`,
      body: html`<p>Namespace <code>${namespace}</code>. The last ${HISTORY_ENTRIES} changes, newest first.</p>
        ${table(['At', 'Revision', 'Change', 'Actor', 'Reason', 'Job'], entries.map((entry) => historyRow(context, entry)), 'No history.')}
        <p><a href="${context.href('schedules')}">Back to the schedules</a></p>`,
    };
  },
};
