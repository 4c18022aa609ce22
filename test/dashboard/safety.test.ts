/**
 * What keeps the dashboard safe, tried over real HTTP against a real database: every request
 * asks `authorize`, job data is hidden without `read-data`, and a change needs a form of the
 * dashboard's own (same origin, CSRF token bound to the browser's cookie), the permission for
 * that change and a dashboard that is not read-only. A refused change writes nothing. A redrive
 * posted twice creates one job. Links stay relative, so a proxy may add any prefix.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NonRetryableError, Worker } from '../../lib/core';
import { createDashboardHandler, type DashboardAction, type DashboardOptions } from '../../lib/dashboard/handler';
import { claimOne } from '../support/protocol';
import { FormClient, linksOf } from './form-client';
import { useTestDatabase } from '../support/test-database';

const { db, queue, admin } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: async () => {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  },
});
const servers: Server[] = [];

/**
 * Who may do what, by the `x-role` header: `viewer` reads metadata only, `redriver` may also
 * read job data and redrive, `operator` may do everything.
 */
function authorize(request: IncomingMessage, action: DashboardAction): boolean {
  const role = request.headers['x-role'];
  if (role === 'operator') return true;
  if (role === 'redriver') return action === 'read' || action === 'read-data' || action === 'redrive-job';
  if (role === 'viewer') return action === 'read';
  return false;
}

async function serve(extra: Partial<DashboardOptions> = {}, path = '/workhorse'): Promise<string> {
  const handler = createDashboardHandler({ admin, path, authorize, actor: (request) => `role:${String(request.headers['x-role'])}`, ...extra });
  const server = createServer((req, res) => void handler(req, res));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function deadLetter(q: string, payload: object): Promise<string> {
  const id = await queue.enqueue('import.run', payload, { queue: q });
  const worker = new Worker(queue, { queues: [q] }).handle('import.run', async (_payload, ctx) => {
    await ctx.checkpoint('fetch', () => ({ checkpointed: 'ck-value-7' }));
    throw new NonRetryableError('upstream refused');
  });
  await worker.runOnce();
  return id;
}

const paused = async (name: string) => (await admin.listQueues()).find((q) => q.queue === name)?.paused ?? false;

beforeAll(async () => {
  await queue.enqueue('report.build', { secret: 'card 4242' }, { queue: 'guarded' });
});

describe('authorization', () => {
  it('asks authorize for every request, assets included, and shows nothing when read is refused', async () => {
    const asked: string[] = [];
    const origin = await serve({
      authorize: (request, action) => {
        asked.push(`${request.url} ${action}`);
        return false;
      },
    });
    for (const path of ['/workhorse/', '/workhorse/jobs', '/workhorse/assets/dashboard.css', '/workhorse/queues']) {
      const response = await fetch(`${origin}${path}`);
      expect(response.status).toBe(403);
      const text = await response.text();
      expect(text).toContain('not allowed to view the dashboard');
      expect(text).not.toContain('guarded');
    }
    expect(asked).toEqual(['/workhorse/ read', '/workhorse/jobs read', '/workhorse/assets/dashboard.css read', '/workhorse/queues read']);
  });

  it('hides payloads, results and checkpoint values without read-data', async () => {
    const id = await deadLetter('hidden-data', { card: '4242 4242 4242 4242' });
    const origin = await serve();
    const viewer = new FormClient(`${origin}/workhorse/`, { 'x-role': 'viewer' });
    const page = await viewer.get(`jobs/${id}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('upstream refused');
    expect(page.text).not.toContain('4242');
    expect(page.text).toContain('<h2>Checkpoints</h2>');
    expect(page.text).not.toContain('ck-value-7');
    expect(page.text).toContain('needs the <code>read-data</code> permission');
    expect((await viewer.get(`jobs/${id}/payload.json`)).status).toBe(403);

    const operator = new FormClient(`${origin}/workhorse/`, { 'x-role': 'operator' });
    const shown = (await operator.get(`jobs/${id}`)).text;
    expect(shown).toContain('4242 4242 4242 4242');
    expect(shown).toContain('ck-value-7');
    const file = await operator.get(`jobs/${id}/payload.json`);
    expect(file.response.headers.get('content-disposition')).toBe(`attachment; filename="${id}-payload.json"`);
    expect(JSON.parse(file.text)).toEqual({ card: '4242 4242 4242 4242' });
  });

  it('offers no change form without the permission, and refuses the change posted anyway', async () => {
    const origin = await serve();
    const viewer = new FormClient(`${origin}/workhorse/`, { 'x-role': 'viewer' });
    for (const path of ['queues', 'dead-letters']) expect((await viewer.get(path)).text).not.toContain('method="post"');

    // The redriver gets forms (and a valid token for its cookie) on the dead letters page, but
    // no pause button: a pause it posts anyway fails on the permission alone.
    const redriver = new FormClient(`${origin}/workhorse/`, { 'x-role': 'redriver' });
    expect((await redriver.get('dead-letters')).text).toContain('method="post"');
    expect((await redriver.get('queues')).text).not.toContain('name="do" value="pause"');
    const refused = await redriver.post('queues', { do: 'pause', queue: 'guarded', reason: 'trying' });
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('not allowed to do this (pause-queue)');
    expect(await paused('guarded')).toBe(false);
  });

  it('looks a form\'s change up among the page\'s own actions only, never among inherited names', async () => {
    const asked: unknown[] = [];
    // A permissive hook: it allows whatever it is asked, so only the lookup stands between a name and a change.
    const origin = await serve({
      authorize: (_request, action) => {
        asked.push(action);
        return true;
      },
    });
    const operator = new FormClient(`${origin}/workhorse/`);
    await operator.get('queues');
    for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__']) {
      asked.length = 0;
      const refused = await operator.post('queues', { do: name, queue: 'guarded', reason: 'inherited' });
      expect([name, refused.status]).toEqual([name, 400]);
      expect(refused.text).toContain('This page offers no such change.');
      expect(asked).toEqual(['read']);
    }
    expect(await paused('guarded')).toBe(false);
  });
});

describe('forged and stale forms', () => {
  let origin: string;
  let operator: FormClient;
  const change = { do: 'pause', queue: 'guarded', reason: 'forged' };

  beforeAll(async () => {
    origin = await serve();
    operator = new FormClient(`${origin}/workhorse/`, { 'x-role': 'operator' });
    await operator.get('queues');
  });

  afterEach(async () => {
    expect(await paused('guarded')).toBe(false);
  });

  it.each([
    ['no Origin and no Sec-Fetch-Site', { origin: null }, 'only from the dashboard'],
    ['another site in Sec-Fetch-Site', { headers: { 'sec-fetch-site': 'cross-site' } }, 'only from the dashboard'],
    ['a sibling site in Sec-Fetch-Site', { headers: { 'sec-fetch-site': 'same-site' } }, 'only from the dashboard'],
    ['another Origin', { origin: 'http://evil.example' }, 'only from the dashboard'],
    ['the opaque Origin of a sandboxed page', { origin: 'null' }, 'only from the dashboard'],
    ['no CSRF cookie', { noCookie: true }, 'has expired'],
    ['no token', { token: '' }, 'has expired'],
    ['a token of another cookie', { token: 'x'.repeat(43) }, 'has expired'],
  ] as const)('refuses a change with %s', async (_case, options, message) => {
    const response = await operator.post('queues', change, options);
    expect(response.status).toBe(403);
    expect(response.text).toContain(message);
  });

  it('refuses a form that is not a form, and a change the page does not offer', async () => {
    const json = await fetch(`${origin}/workhorse/queues`, {
      method: 'POST',
      headers: { 'x-role': 'operator', 'content-type': 'application/json', origin },
      body: JSON.stringify(change),
    });
    expect(json.status).toBe(415);
    expect((await operator.post('queues', { ...change, do: 'drop' })).status).toBe(400);
    expect((await operator.post('jobs', change)).status).toBe(400);
    expect((await fetch(`${origin}/workhorse/queues`, { method: 'DELETE', headers: { 'x-role': 'operator' } })).status).toBe(405);
  });

  it('requires a reason, and accepts the same form from the same origin', async () => {
    expect((await operator.post('queues', { ...change, reason: '  ' })).status).toBe(400);
    expect((await operator.post('queues', change, { headers: { 'sec-fetch-site': 'same-origin' }, origin: null })).status).toBe(303);
    expect(await paused('guarded')).toBe(true);
    expect((await operator.post('queues', { ...change, do: 'resume' })).status).toBe(303);
  });

  it('accepts a trusted origin (a proxy that rewrites Host), and a token only from its own secret', async () => {
    const proxied = await serve({ trustedOrigins: ['https://ops.example.com'], secret: 's'.repeat(32) });
    const client = new FormClient(`${proxied}/workhorse/`, { 'x-role': 'operator' });
    await client.get('queues');
    const other = await serve({ secret: 't'.repeat(32) });
    const stranger = new FormClient(`${other}/workhorse/`, { 'x-role': 'operator' });
    await stranger.get('queues');
    // A token of another secret, with this client's cookie: refused.
    expect((await client.post('queues', change, { token: stranger.token ?? '', origin: 'https://ops.example.com' })).status).toBe(403);
    expect((await client.post('queues', change, { origin: 'https://ops.example.com' })).status).toBe(303);
    expect((await client.post('queues', { ...change, do: 'resume' }, { origin: 'https://ops.example.com' })).status).toBe(303);
  });
});

describe('a read-only dashboard', () => {
  it('shows everything to an operator but offers and accepts no change', async () => {
    const id = await deadLetter('read-only', { n: 1 });
    const origin = await serve({ readOnly: true });
    const operator = new FormClient(`${origin}/workhorse/`, { 'x-role': 'operator' });
    for (const path of ['queues', 'dead-letters', `jobs/${id}`]) {
      const page = await operator.get(path);
      expect(page.text).not.toContain('method="post"');
      expect(page.text).toContain('read-only');
    }
    expect((await operator.get(`jobs/${id}`)).text).toContain('&quot;n&quot;: 1');
    const refused = await operator.post('queues', { do: 'pause', queue: 'guarded', reason: 'no' }, { token: 'x' });
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('read-only');
    expect((await operator.post('dead-letters', { do: 'redrive', id, request: '00000000-0000-4000-8000-000000000000', reason: 'no' })).status).toBe(403);
    expect((await admin.getJob(id))?.redrivenTo).toEqual([]);
  });
});

describe('redrive through the forms', () => {
  it('previews without writing, then redrives once however often the confirmation is posted', async () => {
    const id = await deadLetter('redrive-forms', { order: 7 });
    const origin = await serve();
    const operator = new FormClient(`${origin}/workhorse/`, { 'x-role': 'operator' });
    await operator.get('dead-letters?queue=redrive-forms');

    const preview = await operator.post('dead-letters', { do: 'preview', id });
    expect(preview.status).toBe(200);
    expect(preview.text).toContain('This is a dry run: nothing has been written.');
    expect((await admin.getJob(id))?.redrivenTo).toEqual([]);
    const request = /name="request" value="([^"]+)"/.exec(preview.text)?.[1] ?? '';

    const confirm = { do: 'redrive', id, request, reason: 'provider is back' };
    const first = await operator.post('dead-letters', confirm);
    expect(first.status).toBe(303);
    const [created] = (await admin.getJob(id))?.redrivenTo ?? [];
    expect(first.location).toBe(`./jobs/${created}?notice=redriven`);
    expect((await operator.post('dead-letters', confirm)).location).toBe(first.location);
    expect((await admin.getJob(id))?.redrivenTo).toEqual([created]);

    const { items } = await admin.getJobTimeline(id);
    expect(items.find((entry) => entry.kind === 'redriven')?.data).toMatchObject({
      newJobId: created,
      actor: 'role:operator',
      reason: 'provider is back',
    });
    expect((await admin.getJob(created))?.payload).toEqual({ order: 7 });
  });

  it('previews every match of a filter and redrives exactly those', async () => {
    const ids = [await deadLetter('redrive-all', { n: 1 }), await deadLetter('redrive-all', { n: 2 })];
    const origin = await serve();
    const operator = new FormClient(`${origin}/workhorse/`, { 'x-role': 'operator' });
    await operator.get('dead-letters?queue=redrive-all');
    const preview = await operator.post('dead-letters', { do: 'preview-all', queue: 'redrive-all' });
    expect(preview.text).toContain('2 dead letters match');
    const listed = [...preview.text.matchAll(/name="id" value="([^"]+)"/g)].map((m) => m[1]);
    expect(listed.sort()).toEqual([...ids].sort());
    const late = await deadLetter('redrive-all', { n: 3 });
    const request = /name="request" value="([^"]+)"/.exec(preview.text)?.[1] ?? '';
    const done = await operator.post('dead-letters', { do: 'redrive', id: listed, request, reason: 'bulk' });
    expect(done.status).toBe(200);
    expect(done.text).toContain('2 of 2 dead letters redriven');
    for (const id of ids) expect((await admin.getJob(id))?.redrivenTo).toHaveLength(1);
    expect((await admin.getJob(late))?.redrivenTo).toEqual([]);
  });
});

describe('behind a proxy that adds a path prefix', () => {
  it('serves pages whose relative links resolve under the prefix', async () => {
    const target = new URL(await serve());
    // The proxy serves the application under /ops and strips the prefix before forwarding.
    const proxy = createServer((incoming, outgoing) => {
      if (!incoming.url?.startsWith('/ops/')) {
        outgoing.statusCode = 404;
        outgoing.end();
        return;
      }
      const forwarded = httpRequest(
        { host: target.hostname, port: target.port, path: incoming.url.slice('/ops'.length), method: incoming.method, headers: incoming.headers },
        (answer) => {
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(outgoing);
        },
      );
      incoming.pipe(forwarded);
    });
    servers.push(proxy);
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/ops/workhorse/`;
    const client = new FormClient(base, { 'x-role': 'operator' });

    const bare = await fetch(base.slice(0, -1), { redirect: 'manual', headers: { 'x-role': 'operator' } });
    expect(new URL(bare.headers.get('location') ?? '', base.slice(0, -1)).href).toBe(base);
    const jobs = await client.get('jobs');
    const jobLink = linksOf(jobs.text).find((link) => link.startsWith('./jobs/'));
    expect(jobLink).toBeDefined();
    const job = await client.get(jobLink as string);
    expect(job.status).toBe(200);
    for (const link of linksOf(job.text).filter((l) => !l.startsWith('data:'))) {
      const resolved = new URL(link, new URL(jobLink as string, base));
      expect(resolved.pathname.startsWith('/ops/workhorse/')).toBe(true);
    }
    // A change through the proxy: the browser's Origin is the proxy's.
    await client.get('queues');
    expect((await client.post('queues', { do: 'pause', queue: 'guarded', reason: 'via proxy' })).location).toBe('./queues?notice=paused');
    expect(await paused('guarded')).toBe(true);
    await admin.resumeQueue('guarded');
  });
});

describe('cancel through the job page', () => {
  it('cancels a waiting job at once and asks a running one to stop, recording the operator and the reason', async () => {
    const origin = await serve();
    const operator = new FormClient(`${origin}/workhorse/`, { 'x-role': 'operator' });
    const waiting = await queue.enqueue('report.build', {}, { queue: 'cancel-forms', runAt: new Date(Date.now() + 3_600_000) });
    const page = await operator.get(`jobs/${waiting}`);
    expect(page.text).toContain('name="do" value="cancel"');
    const done = await operator.post(`jobs/${waiting}`, { do: 'cancel', reason: 'report no longer needed' });
    expect(done.location).toBe(`../jobs/${waiting}?notice=canceled`);
    expect(await admin.getJob(waiting)).toMatchObject({ state: 'canceled', error: { name: 'Canceled', message: 'report no longer needed', actor: 'role:operator' } });
    const shown = await operator.get(`jobs/${waiting}?notice=canceled`);
    expect(shown.text).toContain('The job is canceled.');
    expect(shown.text).toContain('by <strong>role:operator</strong>');
    expect(shown.text).not.toContain('name="do" value="cancel"');

    const running = await queue.enqueue('report.build', {}, { queue: 'cancel-forms' });
    await claimOne(db.pool, 'cancel-forms');
    await operator.get(`jobs/${running}`);
    const requested = await operator.post(`jobs/${running}`, { do: 'cancel', reason: 'stuck on a lock' });
    expect(requested.location).toBe(`../jobs/${running}?notice=cancel-requested`);
    const { items } = await admin.getJobTimeline(running);
    expect(items.find((entry) => entry.kind === 'cancel_requested')?.data).toEqual({ reason: 'stuck on a lock', actor: 'role:operator' });
    expect((await admin.getJob(running))?.state).toBe('active');
    // A viewer's page offers no cancel.
    const viewer = new FormClient(`${origin}/workhorse/`, { 'x-role': 'viewer' });
    expect((await viewer.get(`jobs/${running}`)).text).not.toContain('method="post"');
  });
});

describe('the cost of a page', () => {
  it('gives up on counting finished jobs after its time budget and says so, instead of holding on', async () => {
    const origin = await serve();
    const operator = new FormClient(`${origin}/workhorse/`, { 'x-role': 'operator' });
    // Another session holds job_outcome so that the read waits, as a huge window would run long.
    const blocker = await db.pool.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE workhorse.job_outcome IN ACCESS EXCLUSIVE MODE');
      const started = Date.now();
      const page = await operator.get('?window=7d');
      expect(page.status).toBe(200);
      expect(page.text).toContain('Too many jobs finished in the last 7 days to count them within 3 s');
      expect(page.text).not.toContain('class="charts"');
      // The health reads the last hour's dead letters from the same table: it gives up within the same budget.
      expect(page.text).toContain('The health could not be read within 3 s');
      expect(Date.now() - started).toBeLessThan(15_000);
      // The answer is kept for the window's cache period, so a slow window costs the server one
      // read per period, not one per view: asked again while the table is still held, the page
      // does not wait out another budget (3 s).
      const again = Date.now();
      expect((await operator.get('?window=7d')).text).toContain('Too many jobs finished');
      expect(Date.now() - again).toBeLessThan(2_900);
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    // Other windows are read as usual.
    expect((await operator.get('?window=24h')).text).toContain('class="charts"');
  });
});
