import type { HealthReason, HealthReasonCode, HealthReport, HealthThresholds } from '../../core/operator/health';
import { time } from '../format';
import { html, type Html } from '../html';
import { table } from '../layout';
import type { PageContext } from '../page';

/**
 * Each reason of `admin.health()`: the threshold that sets its levels, the unit of its value, and
 * what it means, in the words of the runbook's table (docs/operations.md, checked by a test).
 */
export const HEALTH_REASONS: Readonly<Record<HealthReasonCode, { threshold: keyof HealthThresholds | null; unit: 'ms' | 'count'; meaning: string }>> = {
  oldest_ready_age: {
    threshold: 'oldestReadyMs',
    unit: 'ms',
    meaning: 'a queue\u2019s oldest ready job has waited that long: workers are too few, too slow, paused, or not listening to that queue',
  },
  expired_leases: {
    threshold: 'expiredLeases',
    unit: 'count',
    meaning: 'active jobs whose lease ran out over 10 s ago and were not recovered: maintenance is not running (no worker ticks) or fails',
  },
  dead_letters: { threshold: 'failedLastHour', unit: 'count', meaning: 'jobs of a queue failed for good in the last hour' },
  retention_lag: { threshold: 'retentionLagMs', unit: 'ms', meaning: 'retention is behind its window: no tick runs, or it cannot keep up' },
  ready_without_workers: { threshold: 'readyWithoutWorkers', unit: 'count', meaning: 'ready jobs and no worker registered as running' },
  partitions_missing: {
    threshold: null,
    unit: 'count',
    meaning: 'today\u2019s or tomorrow\u2019s history partition is missing: the tick cannot create them (rights, lock timeouts)',
  },
  maintenance_stale: {
    threshold: 'maintenanceStaleMs',
    unit: 'ms',
    meaning: 'no maintenance tick did its work for that long: no worker ticks, ticks fail, or a session holds a tick\u2019s transaction open',
  },
  retention_stale: {
    threshold: 'maintenanceStaleMs',
    unit: 'ms',
    meaning: 'retention is enabled but no pass ran for that long: ticks do not reach it, or a session holds a pass\u2019s transaction open',
  },
};

function amount(value: number, unit: 'ms' | 'count'): string {
  if (unit === 'count') return String(value);
  if (value < 1000) return `${value} ms`;
  const seconds = value / 1000;
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86_400)} d`;
}

/** `warn: oldest_ready_age`, coloured by its level. */
export function reasonBadge(reason: HealthReason): Html {
  return html`<span class="health health-${reason.level}" title="${HEALTH_REASONS[reason.code].meaning}">${reason.level}: ${reason.code}</span>`;
}

/** The reasons of one queue, worst first (as `health()` orders them). */
export function reasonsOf(report: HealthReport, queue: string): HealthReason[] {
  return report.reasons.filter((reason) => reason.queue === queue);
}

/**
 * The health section of the overview: the status, and each reason with the queue it concerns,
 * the measured value, the threshold it reached and what it means.
 */
export function healthSection(context: PageContext, report: HealthReport | null, budgetMs: number): Html {
  if (report === null) {
    return html`<section id="health"><h2>Health: <span class="health health-warn">unknown</span></h2>
      <p class="notice" role="status">The health could not be read within ${budgetMs / 1000} s (a lock held elsewhere, or a very busy database); it is tried again in a few seconds.</p></section>`;
  }
  const rows = report.reasons.map((reason) => {
    const known = HEALTH_REASONS[reason.code];
    return html`<tr data-reason="${reason.code}">
      <td>${reasonBadge(reason)}</td>
      <td>${reason.queue === null ? html`<span class="muted">all queues</span>` : html`<a href="${context.href('jobs', { queue: reason.queue })}">${reason.queue}</a>`}</td>
      <td class="num">${amount(reason.value, known.unit)}</td>
      <td class="num">${amount(reason.threshold, known.unit)} <span class="muted">(${known.threshold ?? 'fixed'}.${reason.level})</span></td>
      <td>${known.meaning}</td>
    </tr>`;
  });
  return html`<section id="health"><h2>Health: <span class="health health-${report.status}">${report.status}</span></h2>
    ${table(['Level and reason', 'Queue', 'Value', 'Threshold', 'What it means'], rows, 'No reason for concern: every threshold is below its warn level.')}
    <p class="muted">From <code>admin.health()</code> at ${time(report.checkedAt)}; workers running ${report.workers.running}, draining ${report.workers.draining}, gone ${report.workers.gone}.
      What to do about each reason: the runbook, <code>docs/operations.md</code>, section Health (the dashboard links to nothing outside itself).</p></section>`;
}
