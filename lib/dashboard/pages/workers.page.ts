import type { DrainResult, WorkerInfo, WorkerStatus } from '../../core/operator/live-workers';
import { loginRole, relative, time } from '../format';
import { html, type Html } from '../html';
import { DashboardHttpError } from '../http-request';
import { changeForm, reasonField, reasonOf, table, type Notice } from '../layout';
import type { ActionContext, ActionResult, DashboardPage, PageContext } from '../page';
import { sortRows, type SortColumn } from '../sorting';

const STATUS_CLASS: Readonly<Record<WorkerStatus, string>> = {
  running: 'health-ok',
  draining: 'health-paused',
  drained: 'muted',
  gone: 'health-failing',
};

const DRAIN_NOTICES: Readonly<Record<DrainResult, Notice>> = {
  requested: 'drain-requested',
  already_requested: 'drain-already-requested',
  not_found: 'worker-not-found',
};

/** How long ago a worker last reported; `just now` within a second (the database's clock may run a little ahead). */
function seenAgo(worker: WorkerInfo, now: Date): string {
  return now.getTime() - worker.lastSeenAt.getTime() < 1000 ? 'just now' : relative(worker.lastSeenAt, now);
}

function drainCell(worker: WorkerInfo): Html {
  if (worker.drainRequestedAt === null) return html`<span class="muted">-</span>`;
  return html`${time(worker.drainRequestedAt)}${worker.drainRequestedBy && html` by <strong>${worker.drainRequestedBy}</strong>`}${loginRole(worker.drainLoginRole)}
    ${worker.drainReason && html`<div class="muted">${worker.drainReason}</div>`}`;
}

async function control(context: PageContext, worker: WorkerInfo): Promise<Html> {
  // Only a running worker hears a drain: a gone one is not reporting, a draining one was asked.
  if (worker.status !== 'running' || !(await context.mayChange('drain-worker'))) return html``;
  const form = changeForm(
    context,
    { route: 'workers', name: 'drain', confirm: 'Drain this worker? It stops claiming for good; restart its process to undo.' },
    html`<input type="hidden" name="worker" value="${worker.workerId}">${reasonField('why it must stop claiming')} <button type="submit">Drain</button>`,
  );
  return html`<details class="row-actions"><summary>Drain…</summary>${form}</details>`;
}

async function drain(context: ActionContext): Promise<ActionResult> {
  const worker = (context.form.get('worker') ?? '').trim();
  if (worker.length === 0 || worker.length > 200) throw new DashboardHttpError(400, 'The form names no worker.');
  const result = await context.admin.drainWorker(worker, { actor: context.actor, reason: reasonOf(context.form) });
  return { redirect: context.href('workers', { notice: DRAIN_NOTICES[result] }) };
}

/** The workers page's columns; sorted in memory (the page holds every registered worker). */
const WORKER_COLUMNS: ReadonlyArray<SortColumn<WorkerInfo> | string> = [
  { key: 'worker', label: 'Worker', value: (worker) => worker.workerId },
  { key: 'status', label: 'Status', value: (worker) => worker.status },
  { key: 'host', label: 'Host and pid', value: (worker) => `${worker.host}:${String(worker.pid).padStart(10, '0')}` },
  'Queues',
  { key: 'in-flight', label: 'In flight', value: (worker) => worker.inFlight, firstDir: 'desc' },
  { key: 'version', label: 'Version', value: (worker) => worker.version },
  { key: 'last-seen', label: 'Last seen', value: (worker) => worker.lastSeenAt.getTime(), firstDir: 'desc' },
  'Drain requested',
  '',
];

/**
 * The registry of live workers, newest first: where each runs, what it claims from, how many
 * jobs it holds, when it last reported, its drain; and a drain per running worker.
 */
export const workersPage: DashboardPage = {
  route: 'workers',
  live: true,
  nav: 'Workers',
  async render(context) {
    const { rows: workers, head } = sortRows(context, 'workers', await context.admin.listWorkers(), WORKER_COLUMNS);
    const rows = await Promise.all(
      workers.map(
        async (worker) => html`<tr>
          <td class="id"><code>${worker.workerId}</code></td>
          <td><span class="health ${STATUS_CLASS[worker.status]}">${worker.status}</span></td>
          <td>${worker.host} <span class="muted">pid</span> ${worker.pid}</td>
          <td>${worker.queues.map((queue) => html`<a href="${context.href('jobs', { queue })}">${queue}</a> `)}</td>
          <td class="num">${worker.inFlight} <span class="muted">of ${worker.concurrency}</span></td>
          <td>${worker.version}</td>
          <td>${time(worker.lastSeenAt)} <span class="muted">(${seenAgo(worker, context.now)})</span><div class="muted">started ${time(worker.startedAt)}</div></td>
          <td>${drainCell(worker)}</td>
          <td>${await control(context, worker)}</td>
        </tr>`,
      ),
    );
    return {
      title: 'Workers',
      body: html`${table(head, rows, 'No worker is registered: none is running.')}
        <p class="muted">A drained worker stops claiming within its heartbeat interval and finishes the jobs it holds; once it is
        <em>drained</em> its process can be stopped without abandoning work. A drain is not undone: restart the worker. A worker silent
        for three of its report periods is <em>gone</em>: its jobs come back when their leases expire.</p>`,
    };
  },
  actions: { drain: { action: 'drain-worker', run: drain } },
};
