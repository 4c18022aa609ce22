/**
 * The operations pages over real HTTP on a real database: schedules (pause, resume, trigger now),
 * workers (drain), the health on the overview, and queue limits. Each change is recorded with the
 * actor and the reason; each needs its own permission, a form of the dashboard's own (same origin,
 * CSRF token) and a dashboard that is not read-only, and a refused one writes nothing. Stored
 * text (schedule payloads, worker ids, reasons) shows as text.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Worker, WorkhorseValidationError, type ScheduleInfo } from '../../lib/core';
import { resolveDashboardOptions } from '../../lib/dashboard/dashboard-options';
import { createDashboardHandler, type DashboardAction, type DashboardOptions } from '../../lib/dashboard/handler';
import { HEALTH_REASONS } from '../../lib/dashboard/pages/health';
import { waitFor } from '../support/wait';
import { FormClient } from './form-client';
import { useTestDatabase } from '../support/test-database';

const { queue, admin, pool } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: async () => {
    await stopWorkers();
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  },
});
const servers: Server[] = [];
const workers = new Set<Worker>();

const HOSTILE = '<script>window.__pwned=1</script>"><img src=x onerror=alert(1)>';
const KEY = 'billing/nightly:close';
const NAMESPACE = 'ops-pages';

/** `x-deny` names one action the request may not do; everything else is allowed. */
function authorize(request: IncomingMessage, action: DashboardAction): boolean {
  return request.headers['x-deny'] !== action;
}

async function serve(extra: Partial<DashboardOptions> = {}): Promise<string> {
  const handler = createDashboardHandler({ admin, path: '/workhorse', authorize, actor: () => 'ops:grace', ...extra });
  const server = createServer((req, res) => void handler(req, res));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/workhorse/`;
}

/** The login role the dashboard's Admin runs as (recorded next to the actor with each change). */
async function loginRole(): Promise<string> {
  return (await pool.query<{ u: string }>('SELECT session_user AS u')).rows[0].u;
}

async function schedule(): Promise<ScheduleInfo> {
  const found = (await admin.listSchedules({ namespace: NAMESPACE })).find((s) => s.key === KEY);
  if (!found) throw new Error('the schedule is missing');
  return found;
}

/** A worker that registers itself and claims from a queue nobody enqueues to. */
async function startWorker(): Promise<Worker> {
  const worker = new Worker(queue, { queues: ['ops-idle'], leaseMs: 3000, heartbeatMs: 100, tickMs: 100 });
  workers.add(worker);
  void worker.run();
  await waitFor(async () => (await admin.listWorkers()).some((w) => w.workerId === worker.workerId), 10_000, 'the worker to register');
  return worker;
}

async function stopWorkers(): Promise<void> {
  await Promise.all([...workers].map((worker) => worker.stop()));
  workers.clear();
}

beforeAll(async () => {
  await queue.syncSchedules(NAMESPACE, [
    { key: KEY, type: 'ledger.close', cron: '0 3 * * *', timezone: 'Europe/Berlin', payload: { note: HOSTILE, card: '4242' }, options: { queue: 'ledger' } },
  ]);
});

describe('the schedules page', () => {
  it('lists a schedule with its cron, zone, job, next run and state, its payload as text and only with read-data', async () => {
    const operator = new FormClient(await serve());
    const page = await operator.get('schedules');
    expect(page.status).toBe(200);
    expect(page.text).toContain('<code>0 3 * * *</code> <span class="muted">Europe/Berlin</span>');
    expect(page.text).toContain('<strong>ledger.close</strong> on <a href="./jobs?queue=ledger">ledger</a>');
    expect(page.text).toContain(`<time datetime="${(await schedule()).nextRunAt?.toISOString()}">`);
    expect(page.text).toContain('&lt;script&gt;window.__pwned=1&lt;/script&gt;');
    expect(page.text).not.toContain('<script>window');
    expect(page.text).not.toContain('<img src=x');
    for (const action of ['pause', 'trigger']) expect(page.text).toContain(`name="do" value="${action}"`);

    const noData = new FormClient(operator.base, { 'x-deny': 'read-data' });
    const hidden = (await noData.get('schedules')).text;
    expect(hidden).toContain('payload hidden');
    expect(hidden).not.toContain('4242');
  });

  it('pauses and resumes with the actor and reason, shown on the page and in the history', async () => {
    const operator = new FormClient(await serve());
    await operator.get('schedules');
    const paused = await operator.post('schedules', { do: 'pause', namespace: NAMESPACE, key: KEY, reason: `month-end freeze ${HOSTILE}` });
    expect([paused.status, paused.location]).toEqual([303, './schedules?notice=schedule-paused']);
    expect(await schedule()).toMatchObject({ state: 'paused', pausedBy: 'ops:grace', pauseReason: `month-end freeze ${HOSTILE}`, nextRunAt: null });
    const page = (await operator.get('schedules?notice=schedule-paused')).text;
    expect(page).toContain('The schedule is paused');
    expect(page).toContain('by <strong>ops:grace</strong>');
    expect(page).toContain('month-end freeze &lt;script&gt;');
    expect(page).toContain('name="do" value="resume"');
    // Pausing again changes nothing, and says so.
    expect((await operator.post('schedules', { do: 'pause', namespace: NAMESPACE, key: KEY, reason: 'again' })).location).toBe('./schedules?notice=schedule-unchanged');

    expect((await operator.post('schedules', { do: 'resume', namespace: NAMESPACE, key: KEY, reason: 'books closed' })).location).toBe('./schedules?notice=schedule-resumed');
    expect((await schedule()).state).toBe('active');
    const history = await admin.getScheduleHistory(KEY, { namespace: NAMESPACE });
    expect(history.slice(0, 2).map(({ change, actor, reason }) => ({ change, actor, reason }))).toEqual([
      { change: 'resumed', actor: 'ops:grace', reason: 'books closed' },
      { change: 'paused', actor: 'ops:grace', reason: `month-end freeze ${HOSTILE}` },
    ]);
    const shown = await operator.get(`schedule?namespace=${NAMESPACE}&key=${encodeURIComponent(KEY)}`);
    expect(shown.status).toBe(200);
    expect(shown.text).toContain('<td>books closed</td>');
    expect(shown.text).toContain(`ops:grace <span class="login-role">login role <code>${await loginRole()}</code></span>`);
    expect(shown.text).not.toContain('<script>window');
    expect((await operator.get(`schedule?namespace=${NAMESPACE}&key=nope`)).status).toBe(404);
    expect((await operator.get('schedule?namespace=x&key=%3Cb%3E')).status).toBe(400);
  });

  it('triggers now: opens the new job, whose timeline names the actor and the reason, as the history does', async () => {
    const operator = new FormClient(await serve());
    await operator.get('schedules');
    const done = await operator.post('schedules', { do: 'trigger', namespace: NAMESPACE, key: KEY, reason: 'rerun after the fix' });
    expect(done.status).toBe(303);
    const jobId = /^\.\/jobs\/([0-9a-f-]{36})\?notice=triggered$/.exec(done.location ?? '')?.[1] as string;
    expect(await admin.getJob(jobId)).toMatchObject({ type: 'ledger.close', queue: 'ledger', state: 'ready', payload: { note: HOSTILE, card: '4242' } });
    const { items } = await admin.getJobTimeline(jobId);
    expect(items.find((entry) => entry.kind === 'schedule_triggered')?.data).toMatchObject({ namespace: NAMESPACE, key: KEY, actor: 'ops:grace', reason: 'rerun after the fix' });
    expect((await admin.getScheduleHistory(KEY, { namespace: NAMESPACE }))[0]).toMatchObject({ change: 'triggered', actor: 'ops:grace', reason: 'rerun after the fix', jobId });
    expect((await operator.get(`jobs/${jobId}?notice=triggered`)).text).toContain('enqueued by triggering its schedule now');
    expect((await schedule()).lastJobId).toBe(jobId);
    // An unknown schedule is a 404 and enqueues nothing.
    expect((await operator.post('schedules', { do: 'trigger', namespace: NAMESPACE, key: 'nope', reason: 'x' })).status).toBe(404);
  });
});

describe('the workers page', () => {
  afterAll(stopWorkers);

  it('lists a live worker and drains it, recording the actor and the reason', async () => {
    const worker = await startWorker();
    const operator = new FormClient(await serve());
    const page = await operator.get('workers');
    const row = page.text.slice(page.text.indexOf(`<code>${worker.workerId}</code>`));
    expect(row).toContain('>running</span>');
    expect(row).toContain('<a href="./jobs?queue=ops-idle">ops-idle</a>');
    expect(row).toContain(`<span class="muted">pid</span> ${process.pid}</td>`);
    expect(row).toContain('<td class="num">0 <span class="muted">of 10</span></td>');
    expect(row).toContain('name="do" value="drain"');

    const drained = await operator.post('workers', { do: 'drain', worker: worker.workerId, reason: `host maintenance ${HOSTILE}` });
    expect(drained.location).toBe('./workers?notice=drain-requested');
    const info = (await admin.listWorkers()).find((w) => w.workerId === worker.workerId);
    expect(info).toMatchObject({ status: 'drained', drainRequestedBy: 'ops:grace', drainReason: `host maintenance ${HOSTILE}` });
    const after = (await operator.get('workers?notice=drain-requested')).text;
    expect(after).toContain('Drain requested');
    expect(after).toContain('host maintenance &lt;script&gt;');
    expect(after).toContain(`by <strong>ops:grace</strong> <span class="login-role">login role <code>${await loginRole()}</code></span>`);
    expect(after).not.toContain('name="do" value="drain"');
    expect((await operator.post('workers', { do: 'drain', worker: worker.workerId, reason: 'again' })).location).toBe('./workers?notice=drain-already-requested');
    expect((await operator.post('workers', { do: 'drain', worker: 'no-such-worker', reason: 'x' })).location).toBe('./workers?notice=worker-not-found');
    expect((await operator.post('workers', { do: 'drain', reason: 'x' })).status).toBe(400);
  });
});

describe('health on the overview', () => {
  it('shows the level and each reason with its value, threshold and meaning, per queue where it is per queue', async () => {
    await stopWorkers();
    await queue.enqueue('report.build', {}, { queue: 'health-slow' });
    // A threshold of 1 ms: the ready job of health-slow has waited longer by the time the page reads.
    const operator = new FormClient(await serve({ health: { oldestReadyMs: { warn: 1, critical: 3_600_000 } } }));
    const page = (await operator.get('')).text;
    expect(page).toContain('Health: <span class="health health-warn">warn</span>');
    expect(page).toContain('<tr data-reason="ready_without_workers">');
    expect(page).toContain(HEALTH_REASONS.ready_without_workers.meaning);
    expect(page).toContain('(readyWithoutWorkers.warn)');
    const slow = page.slice(page.indexOf('<tr data-reason="oldest_ready_age">'));
    expect(slow).toContain('<a href="./jobs?queue=health-slow">health-slow</a>');
    expect(slow).toContain('<td class="num">1 ms <span class="muted">(oldestReadyMs.warn)</span></td>');
    // The queue's own row names the reason in its health cell.
    const queues = page.slice(page.indexOf('<h2>Queues</h2>'));
    const row = queues.slice(queues.indexOf('<td><a href="./jobs?queue=health-slow">health-slow</a></td>'));
    expect(row.slice(0, row.indexOf('</tr>'))).toContain('warn: oldest_ready_age');
    expect(page).toContain('<code>docs/operations.md</code>, section Health');
  });

  it('words each reason as the runbook does', () => {
    const runbook = readFileSync(join(__dirname, '../../docs/operations.md'), 'utf8');
    for (const [code, reason] of Object.entries(HEALTH_REASONS)) {
      const row = runbook.split('\n').find((line) => line.startsWith(`| \`${code}\` |`));
      expect([code, row?.split(' | ')[2]]).toEqual([code, reason.meaning.replaceAll('\u2019', "'")]);
    }
  });

  it('checks the health option, naming the bad field', () => {
    const attempt = () => resolveDashboardOptions({ admin, path: '/w', authorize, health: { oldestReadyMs: { warn: -1 } } });
    expect(attempt).toThrow(WorkhorseValidationError);
    expect(attempt).toThrow(/^health\.oldestReadyMs\.warn: must be a number/);
  });
});

describe('queue limits', () => {
  it('sets, changes and removes a queue\u2019s limits from the queues page', async () => {
    await queue.enqueue('report.build', {}, { queue: 'limited' });
    const operator = new FormClient(await serve());
    expect((await operator.get('queues')).text).toContain('name="do" value="limits"');
    const set = await operator.post('queues', { do: 'limits', queue: 'limited', concurrency: '4', rateLimit: '30', intervalMs: '60000', reason: 'protect the API' });
    expect(set.location).toBe('./queues?notice=limits-set');
    const info = async () => (await admin.listQueues()).find((q) => q.queue === 'limited');
    expect(await info()).toMatchObject({ concurrency: 4, rateLimit: { limit: 30, intervalMs: 60000 } });
    expect((await operator.get('queues')).text).toContain('at most 4 active, 30 per 60000 ms');
    expect((await operator.get('queues')).text).toContain(`by ops:grace <span class="login-role">login role <code>${await loginRole()}</code></span>: protect the API`);

    const bad = await operator.post('queues', { do: 'limits', queue: 'limited', concurrency: '0', rateLimit: '', intervalMs: '', reason: 'x' });
    expect([bad.status, bad.text.includes('concurrency')]).toEqual([400, true]);
    expect((await operator.post('queues', { do: 'limits', queue: 'limited', concurrency: '2.5', reason: 'x' })).status).toBe(400);
    const half = await operator.post('queues', { do: 'limits', queue: 'limited', concurrency: '', rateLimit: '5', intervalMs: '', reason: 'x' });
    expect([half.status, half.text.includes('needs both')]).toEqual([400, true]);
    expect(await info()).toMatchObject({ concurrency: 4, rateLimit: { limit: 30, intervalMs: 60000 } });

    // A per-key limit from the same form, shown in words; a bad one is refused naming its field.
    await operator.post('queues', { do: 'limits', queue: 'limited', concurrency: '4', rateLimit: '', intervalMs: '', perKey: '2', reason: 'one tenant at a time' });
    expect(await info()).toMatchObject({ concurrency: 4, rateLimit: null, perKey: { concurrency: 2 } });
    expect((await operator.get('queues')).text).toContain('at most 4 active, at most 2 active per key');
    const badKey = await operator.post('queues', { do: 'limits', queue: 'limited', perKey: '0', reason: 'x' });
    expect([badKey.status, badKey.text.includes('perKey.concurrency')]).toEqual([400, true]);

    await operator.post('queues', { do: 'limits', queue: 'limited', concurrency: '', rateLimit: '', intervalMs: '', reason: 'incident over' });
    expect(await info()).toMatchObject({ concurrency: null, rateLimit: null, perKey: null });
  });

  it('shows a job\u2019s concurrency key on its page, escaped', async () => {
    const id = await queue.enqueue('report.build', {}, { queue: 'keyed', concurrencyKey: 'tenant-<7>' });
    const operator = new FormClient(await serve());
    expect((await operator.get(`jobs/${id}`)).text).toContain('<dt>Concurrency key</dt><dd><code>tenant-&lt;7&gt;</code></dd>');
    const plain = await queue.enqueue('report.build', {}, { queue: 'keyed' });
    expect((await operator.get(`jobs/${plain}`)).text).not.toContain('Concurrency key');
  });
});

describe('the changes page', () => {
  it('lists queue pauses, limits, drains and retention changes with the actor, the login role and the reason, as text', async () => {
    const operator = new FormClient(await serve());
    await operator.get('queues');
    await operator.post('queues', { do: 'pause', queue: 'changes-q', reason: `incident ${HOSTILE}` });
    await admin.setRetention({ jobEventDays: 14 }, { actor: 'compliance' });
    const page = await operator.get('changes');
    expect(page.status).toBe(200);
    const role = await loginRole();
    expect(page.text).toContain(`<td>ops:grace <span class="login-role">login role <code>${role}</code></span></td>`);
    expect(page.text).toContain('paused queue <a href="./jobs?queue=changes-q">changes-q</a>');
    expect(page.text).toContain('incident &lt;script&gt;');
    expect(page.text).not.toContain('<script>window');
    expect(page.text).toContain('changed the retention policy');
    expect(page.text).toContain(`by compliance <span class="login-role">login role <code>${role}</code></span>`);
  });
});

describe('safety of every new change', () => {
  interface Change {
    action: DashboardAction;
    route: string;
    fields: () => Record<string, string>;
    /** True when the refused change was carried out after all. */
    written: () => Promise<boolean>;
    /** Brings about the state in which the page would offer the change. */
    setup?: () => Promise<unknown>;
  }
  const CHANGES: readonly Change[] = [
    { action: 'pause-schedule', route: 'schedules', fields: () => ({ do: 'pause', namespace: NAMESPACE, key: KEY }), written: async () => (await schedule()).state === 'paused' },
    {
      action: 'resume-schedule',
      route: 'schedules',
      fields: () => ({ do: 'resume', namespace: NAMESPACE, key: KEY }),
      written: async () => (await schedule()).state === 'active',
      setup: () => admin.pauseSchedule(KEY, { namespace: NAMESPACE, reason: 'to be resumed' }),
    },
    {
      action: 'trigger-schedule',
      route: 'schedules',
      fields: () => ({ do: 'trigger', namespace: NAMESPACE, key: KEY }),
      written: async () => (await admin.getScheduleHistory(KEY, { namespace: NAMESPACE })).some((entry) => entry.change === 'triggered' && entry.reason === 'forged'),
    },
    {
      action: 'drain-worker',
      route: 'workers',
      fields: () => ({ do: 'drain', worker: [...workers][0].workerId }),
      written: async () => (await admin.listWorkers()).some((w) => w.drainReason === 'forged'),
    },
    {
      action: 'set-queue-limits',
      route: 'queues',
      fields: () => ({ do: 'limits', queue: 'guarded-limits', concurrency: '1' }),
      written: async () => (await admin.listQueues()).some((q) => q.queue === 'guarded-limits'),
    },
  ];

  beforeAll(async () => {
    await startWorker();
  });
  afterAll(stopWorkers);

  it.each(CHANGES.map((change) => [change.action, change] as const))('%s: refused without its permission, cross-origin, with a stale token, and when read-only', async (action, change) => {
    await change.setup?.();
    const base = await serve();
    const denied = new FormClient(base, { 'x-deny': action });
    // A valid token for this browser from a page that still offers it other changes: the refusal is the permission's alone.
    await denied.get('queues');
    expect((await denied.get(change.route)).text).not.toContain(`name="do" value="${change.fields().do}"`);
    const refused = await denied.post(change.route, { ...change.fields(), reason: 'forged' });
    expect([refused.status, refused.text.includes(`not allowed to do this (${action})`)]).toEqual([403, true]);

    const operator = new FormClient(base);
    await operator.get(change.route);
    for (const options of [{ origin: 'http://evil.example' }, { origin: null }, { headers: { 'sec-fetch-site': 'cross-site' } }, { token: 'x'.repeat(43) }, { noCookie: true }]) {
      expect([options, (await operator.post(change.route, { ...change.fields(), reason: 'forged' }, options)).status]).toEqual([options, 403]);
    }

    const readOnly = new FormClient(await serve({ readOnly: true }));
    const page = await readOnly.get(change.route);
    expect(page.text).not.toContain('method="post"');
    expect((await readOnly.post(change.route, { ...change.fields(), reason: 'forged' })).status).toBe(403);
    expect(await change.written()).toBe(false);
    // The same change, allowed and well-formed, is offered and goes through (so the refusals above are the checks' doing).
    expect((await operator.get(change.route)).text).toContain(`name="do" value="${change.fields().do}"`);
    expect((await operator.post(change.route, { ...change.fields(), reason: 'forged' })).status).toBe(303);
    expect(await change.written()).toBe(true);
  });
});
