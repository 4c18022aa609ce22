import type { ErrorGroup, TimingStats } from '../../core/operator/job-insights';
import { time, truncate } from '../format';
import { html, type Html } from '../html';
import { table } from '../layout';
import type { DashboardPage, PageContext } from '../page';
import { percentileChart } from '../timing-chart';
import { readWithin } from './overview.page';

/** The windows the timings offer, and how long one read of each is shared by every viewer. */
export const TIMING_WINDOWS = {
  '1h': { label: 'last hour', ms: 3_600_000, cacheMs: 10_000 },
  '24h': { label: 'last 24 hours', ms: 86_400_000, cacheMs: 60_000 },
  '7d': { label: 'last 7 days', ms: 7 * 86_400_000, cacheMs: 300_000 },
} as const;

type TimingWindow = keyof typeof TIMING_WINDOWS;

/** Attempts one read of the percentiles looks at, at most (a sample of a busier window). */
export const TIMING_SAMPLE = 20_000;

function windowOf(query: URLSearchParams): TimingWindow {
  const name = query.get('window');
  return name !== null && Object.hasOwn(TIMING_WINDOWS, name) ? (name as TimingWindow) : '1h';
}

function groupOf(query: URLSearchParams): 'queue' | 'type' {
  return query.get('by') === 'type' ? 'type' : 'queue';
}

interface Timings {
  stats: TimingStats[] | null;
  errors: ErrorGroup[] | null;
}

async function readTimings(context: PageContext, name: TimingWindow, group: 'queue' | 'type'): Promise<Timings> {
  const { ms, cacheMs } = TIMING_WINDOWS[name];
  // Aligned to the cache period, so every viewer of a period reads the same window.
  const since = new Date(Math.floor(context.now.getTime() / cacheMs) * cacheMs - ms + cacheMs);
  const [stats, errors] = await Promise.all([
    context.cached(`timings:${name}:${group}:${since.getTime()}`, cacheMs, () =>
      readWithin(context.admin, (client) => context.admin.jobTimings({ since, group, sample: TIMING_SAMPLE }, client))),
    context.cached(`errors:${name}:${since.getTime()}`, cacheMs, () =>
      readWithin(context.admin, (client) => context.admin.errorGroups({ since, limit: 50 }, client))),
  ]);
  return { stats, errors };
}

function choices(context: PageContext, name: TimingWindow, group: 'queue' | 'type'): Html {
  const windows = (Object.keys(TIMING_WINDOWS) as TimingWindow[]).map((key) =>
    key === name ? html`<strong>${TIMING_WINDOWS[key].label}</strong>` : html`<a href="${context.href('timings', { window: key, by: group })}">${TIMING_WINDOWS[key].label}</a>`,
  );
  const groups = (['queue', 'type'] as const).map((key) =>
    key === group ? html`<strong>per ${key}</strong>` : html`<a href="${context.href('timings', { window: name, by: key })}">per ${key}</a>`,
  );
  return html`<p class="windows"><span class="muted">Attempts that ended in the</span> ${windows} ${groups}</p>`;
}

function errorRow(context: PageContext, group: ErrorGroup): Html {
  return html`<tr>
    <td><a href="${context.href('jobs', { error: group.name })}"><strong>${group.name}</strong></a></td>
    <td class="error-text">${truncate(group.message, 200)}</td>
    <td class="num">${group.failures.toLocaleString('en')}</td>
    <td>${group.queues.map((queue) => html`<a class="tag" href="${context.href('jobs', { queue, state: 'failed' })}">${queue}</a> `)}</td>
    <td>${time(group.firstSeen)}</td>
    <td>${time(group.lastSeen)}</td>
  </tr>`;
}

/** Run and wait time percentiles per queue or type, and the window's failures grouped by error. */
export const timingsPage: DashboardPage = {
  route: 'timings',
  nav: 'Timings',
  async render(context) {
    const name = windowOf(context.query);
    const group = groupOf(context.query);
    const { stats, errors } = await readTimings(context, name, group);
    const sampled = stats?.some((row) => row.sampled) === true;
    const tooSlow = html`<p class="notice" role="status">Reading the ${TIMING_WINDOWS[name].label} took too long; choose a shorter window.</p>`;
    return {
      title: 'Timings',
      body: html`${choices(context, name, group)}
        ${sampled && html`<p class="muted">More than ${TIMING_SAMPLE.toLocaleString('en')} attempts ended in the window: the percentiles are those of ${TIMING_SAMPLE.toLocaleString('en')} of them.</p>`}
        <div class="charts">
          <section id="run-times"><h2>Run time per ${group}</h2>${stats === null ? tooSlow : percentileChart(`Run time percentiles per ${group}`, stats, (row) => row.run)}</section>
          <section id="wait-times"><h2>Wait before the first start per ${group}</h2>${stats === null ? tooSlow : percentileChart(`Wait time percentiles per ${group}`, stats, (row) => row.wait)}</section>
        </div>
        <section id="error-groups"><h2>Failures by error</h2>
        ${errors === null ? tooSlow : table(['Error', 'Message', 'Failures', 'Queues', 'First seen', 'Last seen'], errors.map((g) => errorRow(context, g)), 'No job failed in this window.')}
        </section>`,
    };
  },
};
