/**
 * Human waits, signals and a job's family in the dashboard, over real HTTP against a real
 * database: the waits page shows each open wait's context (escaped, hidden without permission)
 * and offers exactly its choices; a decision goes through the same checks as every change
 * (same origin, CSRF token, `decide-wait`, not read-only) and lands in the job's timeline with
 * the actor and the reason; a decision outside the choices, or on a wait decided already, is a
 * page that says so and writes nothing. The job page links prerequisites, parent and children
 * with their states and lists signals and waits, hostile names shown as text.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NonRetryableError, Worker } from '../../lib/core';
import { createDashboardHandler, type DashboardAction, type DashboardOptions } from '../../lib/dashboard/handler';
import { FormClient } from './form-client';
import { useTestDatabase } from '../support/test-database';

const { queue, admin } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: async () => {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  },
});
const servers: Server[] = [];

const HOSTILE = {
  name: 'approve<img src=x onerror="window.__pwned=1">',
  choice: '<script>window.__pwned="choice"</script>',
  context: { note: '</pre><script>window.__pwned="context"</script>', amount: 'card 4242' },
  signal: '<svg onload="window.__pwned=\'signal\'">',
  payload: { secret: '<b>payload 7777</b>' },
};

/** `operator` may do everything; `decider` may read and decide (not read data); `viewer` only reads. */
function authorize(request: IncomingMessage, action: DashboardAction): boolean {
  const role = request.headers['x-role'];
  if (role === 'operator') return true;
  if (role === 'decider') return action === 'read' || action === 'decide-wait';
  if (role === 'redriver') return action === 'read' || action === 'read-data' || action === 'redrive-job';
  return role === 'viewer' && action === 'read';
}

async function serve(extra: Partial<DashboardOptions> = {}): Promise<string> {
  const handler = createDashboardHandler({ admin, path: '/workhorse', authorize, actor: (request) => `role:${String(request.headers['x-role'])}`, ...extra });
  const server = createServer((req, res) => void handler(req, res));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/workhorse/`;
}

function worker(name: string): Worker {
  return new Worker(queue, { queues: [name] })
    .handle('refund.review', async (_payload, ctx) => {
      await ctx.waitForSignal(HOSTILE.signal);
      const decided = await ctx.waitForHuman(HOSTILE.name, { context: HOSTILE.context, choices: ['ok', HOSTILE.choice], timeoutMs: 3_600_000 });
      return { decision: decided.decision };
    })
    .handle('refund.free', async (_payload, ctx) => ({ decision: (await ctx.waitForHuman('amount')).decision }));
}

/** A job of `queueName` parked on its human wait (after a signal it consumed, and one buffered). */
async function parkedOnDecision(queueName: string): Promise<string> {
  const id = await queue.enqueue('refund.review', HOSTILE.payload, { queue: queueName });
  const run = worker(queueName);
  await run.runOnce();
  expect(await queue.sendSignal(id, HOSTILE.signal, HOSTILE.payload)).toBe('delivered');
  await run.runOnce();
  expect(await queue.sendSignal(id, 'extra', { kept: true })).toBe('buffered');
  expect((await admin.getJob(id))?.state).toBe('scheduled');
  return id;
}

const decisions = async (id: string) => (await admin.getJobTimeline(id)).items.filter((entry) => entry.kind === 'human_decided');

describe('the human waits page', () => {
  it('shows each open wait with its context escaped and a form offering exactly its choices', async () => {
    const id = await parkedOnDecision('waits-page');
    const operator = new FormClient(await serve(), { 'x-role': 'operator' });
    const page = await operator.get('waits?queue=waits-page');
    expect(page.status).toBe(200);
    expect(page.text).toContain(`href="./jobs/${id}"`);
    expect(page.text).toContain('&lt;/pre&gt;&lt;script&gt;window.__pwned=\\&quot;context\\&quot;&lt;/script&gt;');
    expect(page.text).toContain('approve&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;');
    const offered = [...page.text.matchAll(/<input type="radio" name="decision" value="([^"]*)"/g)].map((m) => m[1]);
    expect(offered).toEqual(['ok', '&lt;script&gt;window.__pwned=&quot;choice&quot;&lt;/script&gt;']);
    expect(page.text).toContain('name="do" value="decide"');
    // No markup of the data: the one script is the dashboard's own, in the head.
    expect(page.text.match(/<script/g)).toHaveLength(1);
    expect(page.text).not.toMatch(/<(img|svg)\b/);
  });

  it('pages with a cursor, oldest first, and filters by wait name', async () => {
    const ids = await queue.enqueueMany(Array.from({ length: 26 }, (_, n) => ({ type: 'refund.free', payload: { n }, queue: 'waits-paging' })));
    await new Worker(queue, { queues: ['waits-paging'], concurrency: 26 })
      .handle('refund.free', async (_payload, ctx) => ctx.waitForHuman('amount'))
      .runOnce();
    const operator = new FormClient(await serve(), { 'x-role': 'operator' });
    const listed = (text: string) => [...text.matchAll(/<article class="wait">[\s\S]*?href="\.\/jobs\/([0-9a-f-]{36})"/g)].map((m) => m[1]);
    const first = await operator.get('waits?queue=waits-paging&limit=25');
    const next = /<a href="([^"]+)" rel="next">Next waits<\/a>/.exec(first.text)?.[1].replaceAll('&amp;', '&') ?? '';
    expect(next).toMatch(/^\.\/waits\?queue=waits-paging&limit=25&cursor=/);
    const second = await operator.get(next);
    const parked = (await admin.listHumanWaits({ queue: 'waits-paging', limit: 100 })).items.map((wait) => wait.jobId);
    expect([...listed(first.text), ...listed(second.text)]).toEqual(parked);
    expect(new Set(parked)).toEqual(new Set(ids));
    expect(listed(second.text)).toHaveLength(1);
    expect(listed((await operator.get('waits?queue=waits-paging&name=nothing')).text)).toEqual([]);
    expect((await operator.get('waits?queue=Not%20a%20name')).status).toBe(400);
  });

  it('hides the context from a viewer without read-data, and offers it no form', async () => {
    await parkedOnDecision('waits-viewer');
    const viewer = new FormClient(await serve(), { 'x-role': 'viewer' });
    const page = await viewer.get('waits?queue=waits-viewer');
    expect(page.text).not.toContain('card 4242');
    expect(page.text).toContain('Context hidden');
    expect(page.text).not.toContain('method="post"');
    // Whoever may decide sees what they decide on, even without read-data.
    const decider = new FormClient(page.response.url.replace(/waits.*$/, ''), { 'x-role': 'decider' });
    const shown = await decider.get('waits?queue=waits-viewer');
    expect(shown.text).toContain('card 4242');
    expect(shown.text).toContain('name="do" value="decide"');
  });
});

describe('deciding through the form', () => {
  it('records the decision with the actor and the reason, and the job goes on with it', async () => {
    const id = await parkedOnDecision('decide-form');
    const operator = new FormClient(await serve(), { 'x-role': 'operator' });
    const page = await operator.get(`jobs/${id}`);
    const request = /name="request" value="([^"]+)"/.exec(page.text)?.[1] ?? '';
    const form = { do: 'decide', job: id, name: HOSTILE.name, request, decision: HOSTILE.choice, reason: 'customer <b>verified</b>' };
    const done = await operator.post('waits', form);
    expect(done.status).toBe(303);
    expect(done.location).toBe(`./jobs/${id}?notice=decided`);
    expect((await admin.getJob(id))?.state).toBe('ready');
    expect((await decisions(id)).map((entry) => entry.data)).toEqual([
      expect.objectContaining({ decision: HOSTILE.choice, actor: 'role:operator', reason: 'customer <b>verified</b>' }),
    ]);
    // The same form posted again (a double click, a reload) records nothing more.
    expect((await operator.post('waits', form)).location).toBe(done.location);
    // Another decision on the decided wait: a page that says so.
    const again = await operator.post('waits', { ...form, request: '00000000-0000-4000-8000-000000000001', decision: 'ok' });
    expect(again.status).toBe(409);
    expect(again.text).toContain('This wait was decided already');
    expect(await decisions(id)).toHaveLength(1);

    await worker('decide-form').runOnce();
    expect(await admin.getJob(id)).toMatchObject({ state: 'succeeded', result: { decision: HOSTILE.choice } });
    const shown = (await operator.get(`jobs/${id}?notice=decided`)).text;
    expect(shown).toContain('The decision is recorded');
    expect(shown).toContain('by <strong>role:operator</strong>: customer &lt;b&gt;verified&lt;/b&gt;');
    expect(shown).not.toContain('name="do" value="decide"');
  });

  it('refuses a decision outside the choices with a message, and writes nothing', async () => {
    const id = await parkedOnDecision('decide-bad');
    const operator = new FormClient(await serve(), { 'x-role': 'operator' });
    await operator.get('waits');
    const base = { do: 'decide', job: id, name: HOSTILE.name, request: '00000000-0000-4000-8000-000000000002', reason: 'r' };
    const outside = await operator.post('waits', { ...base, decision: 'approve <i>all</i>' });
    expect(outside.status).toBe(400);
    expect(outside.text).toContain('&quot;approve &lt;i&gt;all&lt;/i&gt;&quot; is not one of this wait’s choices: choose one of &quot;ok&quot;');
    // The wait's form again, its reason kept; a choice that was offered stays chosen.
    expect(outside.text).toContain('placeholder="why this decision" value="r"');
    expect(outside.text.match(/<input type="radio"/g)).toHaveLength(2);
    const unreasoned = await operator.post('waits', { ...base, decision: 'ok', reason: '' });
    expect(unreasoned.text).toContain('<input type="radio" name="decision" value="ok" required checked>');
    expect((await operator.post('waits', base)).text).toContain('No decision was chosen');
    expect((await operator.post('waits', { ...base, decision: 'ok', reason: ' ' })).status).toBe(400);
    expect((await operator.post('waits', { ...base, job: 'nope', decision: 'ok' })).status).toBe(400);
    expect(await decisions(id)).toEqual([]);
    expect((await admin.getJob(id))?.state).toBe('scheduled');
  });

  it('takes any JSON for a wait without choices, and refuses text that is not JSON', async () => {
    const id = await queue.enqueue('refund.free', {}, { queue: 'decide-json' });
    await worker('decide-json').runOnce();
    const operator = new FormClient(await serve(), { 'x-role': 'operator' });
    expect((await operator.get('waits?queue=decide-json')).text).toContain('<textarea name="decision"');
    const base = { do: 'decide', job: id, name: 'amount', request: '00000000-0000-4000-8000-000000000003', reason: 'r' };
    const bad = await operator.post('waits', { ...base, decision: '{not <json>', reason: 'refund the <b>shipping</b>' });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('The decision must be JSON');
    // The form again, with what was typed (escaped) and the same request id, to correct and send.
    expect(bad.text).toContain('rows="2" placeholder=\'"approve" or {"amount": 10}\'>{not &lt;json&gt;</textarea>');
    expect(bad.text).toContain('name="reason" required maxlength="1000" placeholder="why this decision" value="refund the &lt;b&gt;shipping&lt;/b&gt;"');
    expect(bad.text).toContain(`name="request" value="${base.request}"`);
    expect(bad.text).toContain('name="do" value="decide"');
    expect(await decisions(id)).toEqual([]);
    const noReason = await operator.post('waits', { ...base, decision: '{"cents": 1200}', reason: ' ' });
    expect(noReason.status).toBe(400);
    expect(noReason.text).toContain('Give a reason');
    expect(noReason.text).toContain('>{&quot;cents&quot;: 1200}</textarea>');
    expect((await operator.post('waits', { ...base, decision: '{"cents": 1200}' })).status).toBe(303);
    expect((await decisions(id))[0].data).toMatchObject({ decision: { cents: 1200 } });
  });

  it('asks authorize for decide-wait, and refuses forms of other origins, stale forms and a read-only dashboard', async () => {
    const id = await parkedOnDecision('decide-refused');
    const origin = await serve();
    const form = { do: 'decide', job: id, name: HOSTILE.name, request: '00000000-0000-4000-8000-000000000004', decision: 'ok', reason: 'r' };
    const redriver = new FormClient(origin, { 'x-role': 'redriver' });
    expect((await redriver.get(`jobs/${id}`)).text).not.toContain('value="decide"');
    // A page with a form it may use (a dead letter's redrive) gives it a valid token for its cookie.
    const failed = await queue.enqueue('refund.broken', {}, { queue: 'decide-refused-dead' });
    await new Worker(queue, { queues: ['decide-refused-dead'] })
      .handle('refund.broken', () => {
        throw new NonRetryableError('broken');
      })
      .runOnce();
    expect((await redriver.get(`jobs/${failed}`)).text).toContain('Redrive');
    expect(redriver.token).not.toBeNull();
    const refused = await redriver.post('waits', form);
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('not allowed to do this (decide-wait)');

    const operator = new FormClient(origin, { 'x-role': 'operator' });
    await operator.get('waits');
    expect((await operator.post('waits', form, { origin: 'http://evil.example' })).status).toBe(403);
    expect((await operator.post('waits', form, { headers: { 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
    expect((await operator.post('waits', form, { token: 'x'.repeat(43) })).status).toBe(403);
    expect((await operator.post('waits', form, { noCookie: true })).status).toBe(403);

    const readOnly = new FormClient(await serve({ readOnly: true }), { 'x-role': 'operator' });
    const page = await readOnly.get('waits?queue=decide-refused');
    expect(page.text).toContain('card 4242');
    expect(page.text).not.toContain('method="post"');
    const blocked = await readOnly.post('waits', form, { token: 'x' });
    expect(blocked.status).toBe(403);
    expect(blocked.text).toContain('read-only');
    expect(await decisions(id)).toEqual([]);
  });
});

describe('the job page', () => {
  it('lists signals and waits with their states and deadlines, names as text, data hidden without read-data', async () => {
    const id = await parkedOnDecision('job-waits');
    const origin = await serve();
    const operator = (await new FormClient(origin, { 'x-role': 'operator' }).get(`jobs/${id}`)).text;
    const section = operator.slice(operator.indexOf('<h2>Signals and waits</h2>'), operator.indexOf('<h2>Timeline</h2>'));
    expect(section).toContain('&lt;svg onload=&quot;window.__pwned=&#39;signal&#39;&quot;&gt;');
    expect(section).toContain('delivered to wait #1');
    expect(section).toContain('buffered');
    expect(section).toMatch(/wait-open">open<\/span><\/td><td><time/);
    expect(section).toContain('wait-delivered');
    expect(section).toContain('&lt;b&gt;payload 7777&lt;/b&gt;');
    expect(section).toContain('name="do" value="decide"');
    expect(operator.match(/<script/g)).toHaveLength(1);
    expect(operator).not.toMatch(/<(img|svg|b)\b/);

    const viewer = (await new FormClient(origin, { 'x-role': 'viewer' }).get(`jobs/${id}`)).text;
    expect(viewer).toContain('<h2>Signals and waits</h2>');
    expect(viewer).not.toContain('payload 7777');
    expect(viewer).not.toContain('card 4242');
    // The timeline's entries of signals and of the wait hold the same data: hidden too.
    expect(viewer).toContain('payload=&quot;(hidden)&quot;');
    expect(viewer).not.toContain('method="post"');
  });

  it('links the prerequisites, the parent and the children, with their states', async () => {
    const first = await queue.enqueue('step.one', {}, { queue: 'family' });
    const dependent = await queue.enqueue('step.two', {}, { queue: 'family', dependsOn: [first] });
    const parent = await queue.enqueue('batch.run', {}, { queue: 'family-parents' });
    const run = new Worker(queue, { queues: ['family-parents'] }).handle('batch.run', async (_payload, ctx) => {
      await ctx.runChildren('parts', [0, 1, 2].map((n) => ({ type: 'part.run', payload: { n }, options: { queue: 'family-children' } })));
      return {};
    });
    await run.runOnce();
    const { children } = (await admin.getJob(parent)) ?? { children: [] };
    expect(children).toHaveLength(3);
    const operator = new FormClient(await serve(), { 'x-role': 'viewer' });

    const blocked = (await operator.get(`jobs/${dependent}`)).text;
    expect(blocked).toContain('<h3>Waiting on</h3>');
    expect(blocked).toContain(`<a class="id" href="../jobs/${first}">${first}</a> <span class="state state-ready">ready</span>`);

    const page = (await operator.get(`jobs/${parent}`)).text;
    expect(page).toContain('<h3>Children (3)</h3>');
    for (const child of children) expect(page).toContain(`href="../jobs/${child.id}">${child.id}</a> <span class="state state-ready">`);
    expect(page).toContain(`href="../jobs?parent=${parent}"`);
    const child = (await operator.get(`jobs/${children[0].id}`)).text;
    expect(child).toContain(`Started by the parent <a class="id" href="../jobs/${parent}">`);

    const listed = (await operator.get(`jobs?parent=${parent}`)).text;
    expect([...listed.matchAll(/<td class="id"><a href="\.\/jobs\/([^"]+)"/g)].map((m) => m[1])).toEqual(children.map((c) => c.id));
    expect((await operator.get('jobs?parent=nope')).status).toBe(400);
  });
});
