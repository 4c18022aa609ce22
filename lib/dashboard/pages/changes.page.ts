import type { OperatorChange, OperatorChangeKind } from '../../core/operator/operator-changes';
import { loginRole, time } from '../format';
import { html, type Html } from '../html';
import { table } from '../layout';
import type { DashboardPage, PageContext } from '../page';

const KIND_WORDS: Readonly<Record<OperatorChangeKind, string>> = {
  queue_paused: 'paused queue',
  queue_resumed: 'resumed queue',
  queue_policy_set: 'set the limits of queue',
  worker_drain_requested: 'asked to drain worker',
  retention_set: 'changed the retention policy',
};

function subject(context: PageContext, change: OperatorChange): Html {
  if (change.subject === null) return html``;
  return change.kind === 'worker_drain_requested'
    ? html` <code>${change.subject}</code>`
    : html` <a href="${context.href('jobs', { queue: change.subject })}">${change.subject}</a>`;
}

function row(context: PageContext, change: OperatorChange): Html {
  return html`<tr><td>${time(change.at)}</td>
    <td>${change.actor ?? html`<span class="muted">-</span>`}${loginRole(change.loginRole)}</td>
    <td>${KIND_WORDS[change.kind]}${subject(context, change)}${change.detail === null ? '' : html` <code>${JSON.stringify(change.detail)}</code>`}</td>
    <td>${change.reason ?? ''}</td></tr>`;
}

/**
 * The operator changes of settings kept in place (queue pause and resume, queue limits, drain
 * requests, the retention policy), newest first, each with the actor, its login role and the
 * reason; and the retention policy now in force with who set it.
 */
export const changesPage: DashboardPage = {
  route: 'changes',
  nav: 'Changes',
  async render(context) {
    const [changes, retention] = await Promise.all([context.admin.listOperatorChanges({ limit: 100 }), context.admin.retentionStatus()]);
    const policy = retention.policy;
    return {
      title: 'Operator changes',
      body: html`<p>Retention: ${policy.enabled ? 'on' : 'off'}, job events ${policy.jobEventDays} days, attempts ${policy.attemptHistoryDays} days,
        finished jobs ${Math.round(policy.finishedJobMs / 3_600_000)} h
        <span class="muted">(set ${time(policy.changedAt)}${policy.changedBy && html` by ${policy.changedBy}`}${loginRole(policy.loginRole)})</span></p>
        ${table(['When', 'Who', 'What', 'Reason'], changes.map((change) => row(context, change)), 'No operator change is recorded yet.')}
        <p class="muted">The last 100 changes. <em>Who</em> is the actor the caller named and the database login role of the session
        that made the change, which the caller cannot choose.</p>`,
    };
  },
};
