import type { Admin } from '../../core/admin';
import { CheckedOutClient } from '../../core/checked-out-client';
import type { HealthReport } from '../../core/operator/health';
import { BEGIN_READ_ONLY, COMMIT, ROLLBACK, setLocalStatementTimeout } from '../../core/protocol/session';
import type { PoolClient } from 'pg';
import type { QueueActivity, QueueInfo } from '../../core/types';
import { barChart, sparkline, type ChartSeries } from '../charts';
import { relative } from '../format';
import { html, type Html } from '../html';
import { table } from '../layout';
import type { DashboardPage, PageContext } from '../page';
import { healthSection, reasonBadge, reasonsOf } from './health';

/**
 * The time windows the charts offer: bucket length and count, and how long one read of the
 * window is shared by every viewer of this process (longer for the wider, costlier windows).
 */
export const ACTIVITY_WINDOWS = {
  '1h': { label: 'last hour', bucketSeconds: 60, buckets: 60, cacheMs: 10_000 },
  '24h': { label: 'last 24 hours', bucketSeconds: 1800, buckets: 48, cacheMs: 60_000 },
  '7d': { label: 'last 7 days', bucketSeconds: 4 * 3600, buckets: 42, cacheMs: 300_000 },
} as const;

type WindowName = keyof typeof ACTIVITY_WINDOWS;

/**
 * A read of finished jobs costs what finished inside its window. Past this budget it is
 * canceled by the server and the page says so, instead of a wide window on a busy database
 * holding a connection and a core for long. That answer is cached like a result, so a window
 * too wide for the database costs one canceled read per cache period, not one per view.
 */
export const ACTIVITY_BUDGET_MS = 3_000;

interface Activity {
  buckets: Date[];
  bucketSeconds: number;
  /** Per queue and for all queues (key `''`): counts per bucket. */
  byQueue: Map<string, { succeeded: number[]; failed: number[]; canceled: number[] }>;
}

function windowOf(query: URLSearchParams): WindowName {
  const name = query.get('window');
  return name !== null && Object.hasOwn(ACTIVITY_WINDOWS, name) ? (name as WindowName) : '1h';
}

function toActivity(rows: readonly QueueActivity[], since: Date, bucketSeconds: number, count: number): Activity {
  const buckets = Array.from({ length: count }, (_, i) => new Date(since.getTime() + i * bucketSeconds * 1000));
  const byQueue: Activity['byQueue'] = new Map();
  const series = (queue: string) => {
    let entry = byQueue.get(queue);
    if (!entry) {
      entry = { succeeded: new Array<number>(count).fill(0), failed: new Array<number>(count).fill(0), canceled: new Array<number>(count).fill(0) };
      byQueue.set(queue, entry);
    }
    return entry;
  };
  series('');
  for (const row of rows) {
    const i = Math.floor((row.bucket.getTime() - since.getTime()) / (bucketSeconds * 1000));
    if (i < 0 || i >= count) continue;
    for (const entry of [series(''), series(row.queue)]) {
      entry.succeeded[i] += row.succeeded;
      entry.failed[i] += row.failed;
      entry.canceled[i] += row.canceled;
    }
  }
  return { buckets, bucketSeconds, byQueue };
}

/**
 * A read within the time budget, in a read-only transaction of its own on the admin's pool; null
 * when the server canceled it for taking longer (a huge window, a lock held elsewhere).
 */
export async function readWithin<T>(admin: Admin, read: (client: PoolClient) => Promise<T>): Promise<T | null> {
  const checkedOut = await CheckedOutClient.take(admin.pool);
  const { client } = checkedOut;
  try {
    await client.query(BEGIN_READ_ONLY);
    await client.query(setLocalStatementTimeout(ACTIVITY_BUDGET_MS));
    const rows = await read(client);
    await client.query(COMMIT);
    return rows;
  } catch (error) {
    await client.query(ROLLBACK).catch(() => undefined);
    if ((error as { code?: unknown }).code === QUERY_CANCELED) return null;
    throw error;
  } finally {
    checkedOut.release();
  }
}

/** Finished jobs of a window, or null when reading them took longer than the budget. */
async function readActivity(context: PageContext, name: WindowName): Promise<Activity | null> {
  const { bucketSeconds, buckets, cacheMs } = ACTIVITY_WINDOWS[name];
  const bucketMs = bucketSeconds * 1000;
  // Buckets aligned to their length, the last one holding now.
  const since = new Date(Math.floor(context.now.getTime() / bucketMs) * bucketMs - (buckets - 1) * bucketMs);
  const rows = await context.cached(`activity:${name}:${since.getTime()}`, cacheMs, () =>
    readWithin(context.admin, (client) => context.admin.queueActivity({ since, bucketSeconds }, client)),
  );
  return rows && toActivity(rows, since, bucketSeconds, buckets);
}

/** How long one read of the health is shared by every viewer of this process. */
const HEALTH_CACHE_MS = 5_000;

/** `admin.health()` with the dashboard's thresholds, or null when it took longer than the budget. */
function readHealth(context: PageContext): Promise<HealthReport | null> {
  return context.cached('health', HEALTH_CACHE_MS, () => readWithin(context.admin, (client) => context.admin.health(context.healthThresholds, client)));
}

/** Queues that finished jobs in the last 24 hours (their live counts may all be zero). */
export async function recentlyActiveQueues(context: PageContext): Promise<string[]> {
  const activity = await readActivity(context, '24h');
  return activity ? [...activity.byQueue.keys()].filter((queue) => queue !== '') : [];
}

/** SQLSTATE of a statement canceled by statement_timeout. */
const QUERY_CANCELED = '57014';

const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

function health(queue: QueueInfo | undefined, failed: number, context: PageContext, report: HealthReport | null, name: string): Html {
  const reasons = report === null ? [] : reasonsOf(report, name);
  if (reasons.length > 0) return html`<a href="#health">${reasons.map((reason) => reasonBadge(reason))}</a>`;
  if (queue?.paused) {
    const since = queue.changedAt ? ` ${relative(queue.changedAt, context.now)}` : '';
    return html`<span class="health health-paused" title="${queue.reason ?? ''}">paused${since}</span>`;
  }
  if (failed > 0) return html`<span class="health health-failing">${failed} failed</span>`;
  return html`<span class="health health-ok">ok</span>`;
}

function throughputSeries(entry: { succeeded: number[]; canceled: number[] }): ChartSeries[] {
  return [
    { label: 'succeeded', className: 'fill-succeeded', values: entry.succeeded },
    { label: 'canceled', className: 'fill-canceled', values: entry.canceled },
  ];
}

/** Per queue: jobs by live state, jobs finished in the window, health, activity; and charts of all queues. */
export const overviewPage: DashboardPage = {
  route: '',
  live: true,
  nav: 'Overview',
  async render(context) {
    const name = windowOf(context.query);
    const [queues, read, report] = await Promise.all([context.admin.listQueues(), readActivity(context, name), readHealth(context)]);
    const activity = read ?? toActivity([], new Date(context.now), ACTIVITY_WINDOWS[name].bucketSeconds, 0);
    const info = new Map(queues.map((queue) => [queue.queue, queue]));
    const names = [...new Set([...info.keys(), ...[...activity.byQueue.keys()].filter((q) => q !== ''), ...(report?.reasons ?? []).flatMap((r) => (r.queue === null ? [] : [r.queue]))])].sort();
    const all = activity.byQueue.get('') ?? { succeeded: [], failed: [], canceled: [] };
    const chartBase = { buckets: activity.buckets, bucketSeconds: activity.bucketSeconds };
    const windows = (Object.keys(ACTIVITY_WINDOWS) as WindowName[]).map((key) =>
      key === name ? html`<strong>${ACTIVITY_WINDOWS[key].label}</strong>` : html`<a href="${context.href('', { window: key })}">${ACTIVITY_WINDOWS[key].label}</a>`,
    );
    const rows = names.map((queue) => {
      const live = info.get(queue);
      const counts = activity.byQueue.get(queue) ?? { succeeded: [], failed: [], canceled: [] };
      const failed = sum(counts.failed);
      const jobs = (state: string) => context.href('jobs', { queue, state });
      const cell = (value: number, state: string) => (value > 0 ? html`<a href="${jobs(state)}">${value}</a>` : html`<span class="muted">0</span>`);
      return html`<tr>
        <td><a href="${context.href('jobs', { queue })}">${queue}</a></td>
        <td>${health(live, failed, context, report, queue)}</td>
        <td class="num">${cell(live?.blocked ?? 0, 'blocked')}</td>
        <td class="num">${cell(live?.scheduled ?? 0, 'scheduled')}</td>
        <td class="num">${cell(live?.ready ?? 0, 'ready')}</td>
        <td class="num">${cell(live?.active ?? 0, 'active')}</td>
        <td class="num">${sum(counts.succeeded)}</td>
        <td class="num">${failed > 0 ? html`<a href="${context.href('dead-letters', { queue })}">${failed}</a>` : html`<span class="muted">0</span>`}</td>
        <td class="num">${sum(counts.canceled)}</td>
        <td>${sparkline({ ...chartBase, title: `Jobs of ${queue} finished per bucket`, series: [...throughputSeries(counts), { label: 'failed', className: 'fill-failed', values: counts.failed }] })}</td>
      </tr>`;
    });
    return {
      title: 'Overview',
      body: html`${healthSection(context, report, ACTIVITY_BUDGET_MS)}
        <p class="windows"><span class="muted">Finished in the</span> ${windows}</p>
        ${read === null && html`<p class="notice" role="status">Too many jobs finished in the ${ACTIVITY_WINDOWS[name].label} to count them within ${ACTIVITY_BUDGET_MS / 1000} s; choose a shorter window.</p>`}
        ${read !== null && html`<section class="charts">
          <div><h2>Throughput</h2>${barChart({ ...chartBase, title: `Jobs finished per bucket, ${ACTIVITY_WINDOWS[name].label}`, series: throughputSeries(all) })}</div>
          <div><h2>Failures</h2>${barChart({ ...chartBase, title: `Jobs failed per bucket, ${ACTIVITY_WINDOWS[name].label}`, series: [{ label: 'failed', className: 'fill-failed', values: all.failed }] })}</div>
        </section>`}
        <h2>Queues</h2>
        ${table(['Queue', 'Health', 'Blocked', 'Scheduled', 'Ready', 'Active', 'Succeeded', 'Failed', 'Canceled', 'Activity'], rows, 'No queue has jobs yet.')}
        <p class="muted">Live states count the jobs waiting or running now; succeeded, failed and canceled count the jobs that finished in the ${ACTIVITY_WINDOWS[name].label} (read at most every ${ACTIVITY_WINDOWS[name].cacheMs / 1000} s).</p>`,
    };
  },
};
