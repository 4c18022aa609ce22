/**
 * The dashboard in a real browser (headless Chromium) against the real sample application and a
 * real database: the pages render with their charts; the job list filters; a job opens with its
 * data and timeline; a dead letter is redriven through the dry run; a queue is paused and
 * resumed; a viewer without the operator token sees no data and no change, and a form posted
 * from another site changes nothing; hostile payloads and errors show as text and never run; a
 * human wait is decided with its form and the job goes on with the decision; a parent's page
 * leads to its children and back.
 *
 * With WORKHORSE_DASHBOARD_SCREENSHOTS=1 (`npm run dashboard:screenshots`) it also writes a
 * screenshot of each page to docs/dashboard/.
 */
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { NonRetryableError, Queue, Worker } from '../../lib/core';
import { CHROMIUM, launchChromium } from '../support/chromium';
import { describeIf } from '../support/requirements';
import { operatorPage, startSampleDashboard } from '../support/sample-dashboard';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const TOKEN = 'browser-test-operator-token';
const SCREENSHOTS = process.env.WORKHORSE_DASHBOARD_SCREENSHOTS ? join(__dirname, '../../docs/dashboard') : null;

const HOSTILE_PAYLOAD = {
  html: '<script>window.__pwned = "payload"</script>',
  attribute: '"><img src=x onerror="window.__pwned=\'attribute\'">',
  svg: '<svg onload="window.__pwned=\'svg\'"></svg>',
  terminal: '\u001b[2J\u001b]0;owned\u0007 and \u202eexe.txt',
  // jsonb orders keys by length: this one comes last, after the others, past the inline cut.
  the_huge_value_comes_last: `${'A'.repeat(200_000)}<script>window.__pwned="tail"</script>`,
};
const HOSTILE_ERROR = '</pre><script>window.__pwned="error"</script><b onmouseover="window.__pwned=1">bold</b>';

describeIf(CHROMIUM, 'the dashboard in Chromium', () => {
  const { db, admin } = useTestDatabase({
    afterEachTest: async () => {
      expect(dialogs).toEqual([]);
      expect(await pwned(page)).toBeNull();
    },
    beforeDrop: async () => {
      await browser?.close();
      await new Promise((resolve) => (evil ? evil.close(resolve) : resolve(undefined)));
      await app?.close();
    },
  });
  let app: INestApplication;
  let browser: Browser;
  let operator: BrowserContext;
  let viewer: BrowserContext;
  let page: Page;
  let base: string;
  let evil: Server | undefined;
  const ids: { succeeded: string; deadLetters: string[]; hostile: string } = { succeeded: '', deadLetters: [], hostile: '' };
  const dialogs: string[] = [];

  async function shot(name: string): Promise<void> {
    if (!SCREENSHOTS) return;
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  }

  const pwned = (target: Page) => target.evaluate(() => (globalThis as unknown as { __pwned?: unknown }).__pwned ?? null);

  /**
   * For the screenshots only: an hour of finished jobs, so the charts have a shape. Written
   * straight into the tables (a job row, its routing row, its attempt and its outcome, as the protocol would
   * leave them), because the protocol cannot finish a job in the past.
   */
  async function seedHistory(): Promise<void> {
    await db.pool.query(`
      WITH minutes AS (
        SELECT m, q FROM generate_series(1, 59) AS m, unnest(ARRAY['billing', 'orders', 'mail']) AS q),
      jobs AS (
        SELECT workhorse.new_job_id() AS id, q, now() - make_interval(mins => m) AS at, nextval('workhorse.job_seq') AS seq,
               (n % 23 = 0 AND q = 'mail') OR (m BETWEEN 17 AND 21 AND n % 4 = 0 AND q = 'billing') AS failed
        FROM minutes, generate_series(1, 6 + (8 * (1 + sin(m / 9.0)))::int + CASE q WHEN 'orders' THEN 4 ELSE 0 END) AS n),
      job AS (
        INSERT INTO workhorse.job (id, queue, type, payload, priority, max_attempts, tags, run_at, created_at, seq)
        SELECT id, q, CASE q WHEN 'billing' THEN 'invoice.render' WHEN 'orders' THEN 'order.fulfill' ELSE 'mail.send' END,
               '{}', 0, 25, '{}', at, at, seq FROM jobs),
      routing AS (
        INSERT INTO workhorse.job_query (seq, job_id, queue, type, created_at)
        SELECT seq, id, q, CASE q WHEN 'billing' THEN 'invoice.render' WHEN 'orders' THEN 'order.fulfill' ELSE 'mail.send' END, at FROM jobs),
      attempts AS (
        INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at, error)
        SELECT id, 1, CASE WHEN failed THEN 'failed' ELSE 'succeeded' END, 'screenshot-worker', 1, at + interval '1 second',
               at + interval '2 seconds', CASE WHEN failed THEN '{"name": "Timeout", "message": "upstream did not answer"}'::jsonb END
        FROM jobs)
      INSERT INTO workhorse.job_outcome (job_id, queue, state, result, error, final_attempt, finished_at)
      SELECT id, q, CASE WHEN failed THEN 'failed' ELSE 'succeeded' END, CASE WHEN failed THEN NULL ELSE '{}'::jsonb END,
             CASE WHEN failed THEN '{"name": "Timeout", "message": "upstream did not answer"}'::jsonb END, 1, at + interval '2 seconds'
      FROM jobs`);
  }

  async function seed(): Promise<void> {
    const queue = new Queue(db.pool);
    // Orders through the sample's own API: their jobs wait in `orders` (this app runs no worker).
    for (const customer of ['Ada Lovelace', 'Charles Babbage']) {
      const response = await fetch(`${base}orders`.replace('/workhorse/', '/'), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ customer, item: 'Loom cards', amountCents: 4200 }),
      });
      expect(response.status).toBe(201);
    }
    const imports = await queue.enqueueMany(
      Array.from({ length: 12 }, (_, i) => ({ type: i % 4 === 3 ? 'import.broken' : 'import.csv', payload: { file: `batch-${i}.csv`, rows: 100 + i }, queue: 'imports', tags: ['nightly'] })),
    );
    ids.hostile = await queue.enqueue('webhook.deliver', HOSTILE_PAYLOAD, { queue: 'webhooks', tags: ['<i>tag</i>'] });
    const worker = new Worker(queue, { queues: ['imports', 'webhooks'], concurrency: 4 })
      .handle('webhook.deliver', () => {
        throw new NonRetryableError(HOSTILE_ERROR);
      })
      .handle('import.csv', async (payload: { rows?: number }, ctx) => {
        const parsed = await ctx.checkpoint('parse', () => ({ rows: payload.rows }));
        await ctx.setProgress({ imported: parsed.rows });
        return { imported: parsed.rows };
      })
      .handle('import.broken', () => {
        throw new NonRetryableError('CSV header missing: expected id,name,amount');
      });
    while ((await worker.runOnce()) > 0);
    ids.succeeded = imports[0];
    ids.deadLetters = imports.filter((_, i) => i % 4 === 3);
  }

  beforeAll(async () => {
    const dashboard = await startSampleDashboard(db, 'dashboard-browser', TOKEN);
    ({ app, base } = dashboard);
    if (SCREENSHOTS) await seedHistory();
    await seed();
    browser = await launchChromium();
    viewer = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    // The sample's sign-in: sets the operator cookie and lands on the dashboard.
    ({ context: operator, page } = await operatorPage(browser, dashboard, TOKEN, dialogs, 'dismiss'));
  }, 120_000);

  it('shows the overview: queues with their counts and health, and the charts', async () => {
    await page.goto(base);
    await expect(page.locator('h1').textContent()).resolves.toBe('Overview');
    const imports = page.locator('tr', { has: page.locator('a', { hasText: /^imports$/ }) });
    await expect(imports.locator('.health').textContent()).resolves.toBe('3 failed');
    const orders = page.locator('tr', { has: page.locator('a', { hasText: /^orders$/ }) });
    await expect(orders.locator('td').nth(4).textContent()).resolves.toBe('2');
    expect(await page.locator('.chart svg rect.fill-succeeded').count()).toBeGreaterThan(0);
    expect(await page.locator('.chart svg rect.fill-failed').count()).toBeGreaterThan(0);
    await shot('overview');
  });

  it('lists jobs, filters them by state and queue, and opens one', async () => {
    await page.goto(`${base}jobs?limit=25`);
    await shot('jobs');
    await page.goto(`${base}jobs`);
    if (!SCREENSHOTS) expect(await page.locator('tbody tr').count()).toBe(15);
    // Times are in UTC, as the server wrote them (the script leaves them alone).
    await expect(page.locator('time').first().textContent()).resolves.toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    await page.getByLabel('failed').check();
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/state=failed/);
    const states = await page.locator('tbody .state').allTextContents();
    expect(new Set(states)).toEqual(new Set(['failed']));
    expect(states.length).toBeGreaterThanOrEqual(4);
    await page.getByLabel('Queue').fill('imports');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/queue=imports/);
    expect((await page.locator('tbody td.id').allTextContents()).sort()).toEqual([...ids.deadLetters].sort());

    await page.goto(`${base}jobs?queue=imports&state=succeeded`);
    await page.locator(`a[href="./jobs/${ids.succeeded}"]`).click();
    await page.waitForURL(`${base}jobs/${ids.succeeded}`);
    const text = await page.locator('main').textContent();
    expect(text).toContain('"file": "batch-0.csv"');
    expect(text).toContain('"imported": 100');
    expect(await page.locator('section', { hasText: 'Checkpoints' }).locator('td').first().textContent()).toBe('parse');
    expect(await page.locator('section', { hasText: 'Timeline' }).locator('tbody tr').allInnerTexts()).toEqual(
      expect.arrayContaining([expect.stringContaining('enqueued'), expect.stringContaining('checkpoint_saved'), expect.stringContaining('succeeded')]),
    );
    await shot('job');
  });

  it('redrives dead letters after a dry run, recording the operator and the reason', async () => {
    await page.goto(`${base}dead-letters?queue=imports`);
    expect(await page.locator('tbody tr').count()).toBe(3);
    await shot('dead-letters');
    const [first, second] = ids.deadLetters;
    await page.getByLabel(`Select ${first}`).check();
    await page.getByLabel(`Select ${second}`).check();
    await page.getByRole('button', { name: 'Preview redrive of the selected' }).click();
    await expect(page.locator('main').textContent()).resolves.toContain('This is a dry run: nothing has been written.');
    expect((await admin.getJob(first))?.redrivenTo).toEqual([]);
    await shot('redrive-preview');

    await page.getByLabel('Reason').fill('header fixed upstream');
    await page.getByRole('button', { name: 'Redrive 2 jobs' }).click();
    await expect(page.locator('.notice').textContent()).resolves.toBe('2 of 2 dead letters redriven.');
    for (const id of [first, second]) {
      const source = await admin.getJob(id);
      expect(source?.redrivenTo).toHaveLength(1);
      const { items } = await admin.getJobTimeline(id);
      expect(items.find((entry) => entry.kind === 'redriven')?.data).toMatchObject({ actor: 'sample-operator', reason: 'header fixed upstream' });
    }
    // The new job's page says where it came from.
    const created = (await admin.getJob(first))?.redrivenTo[0] as string;
    await page.locator(`a[href="./jobs/${created}"]`).click();
    await expect(page.locator('section', { hasText: 'Lineage' }).textContent()).resolves.toContain(`Redriven from ${first}`);
    await expect(page.locator('.state').first().textContent()).resolves.toBe('ready');
  });

  it('pauses and resumes a queue, and shows its limits', async () => {
    await admin.setQueuePolicy('orders', { concurrency: 3, rateLimit: { limit: 20, intervalMs: 1000 } });
    await page.goto(`${base}queues`);
    const row = page.locator('tr', { has: page.locator('a', { hasText: /^orders$/ }) });
    await expect(row.textContent()).resolves.toContain('at most 3 active, 20 per 1000 ms');
    await admin.setQueuePolicy('orders', null);
    await row.locator('form.inline').getByLabel('Reason').fill('payment provider outage');
    await row.getByRole('button', { name: 'Pause' }).click();
    await expect(page.locator('.notice').textContent()).resolves.toContain('The queue is paused');
    await expect(row.locator('.health-paused').textContent()).resolves.toBe('paused');
    expect((await admin.listQueues()).find((q) => q.queue === 'orders')).toMatchObject({
      paused: true,
      changedBy: 'sample-operator',
      reason: 'payment provider outage',
    });
    await shot('queues');
    await row.locator('form.inline').getByLabel('Reason').fill('provider back');
    await row.getByRole('button', { name: 'Resume' }).click();
    await waitFor(async () => (await admin.listQueues()).find((q) => q.queue === 'orders')?.paused === false, 5_000, 'the queue to resume');
  });

  it('shows a viewer without the operator token no data and no change, and refuses what it posts', async () => {
    const view = await viewer.newPage();
    await view.goto(`${base}jobs/${ids.succeeded}`);
    const text = (await view.locator('main').textContent()) ?? '';
    expect(text).toContain('Payload hidden');
    expect(text).not.toContain('batch-0.csv');
    expect(await view.locator('form[method="post"]').count()).toBe(0);
    await view.goto(`${base}queues`);
    expect(await view.getByRole('button', { name: 'Pause' }).count()).toBe(0);
    await view.goto(`${base}dead-letters`);
    expect(await view.locator('input[type="checkbox"]').count()).toBe(0);
    // A change posted with the viewer's own cookie from its own origin, with a guessed token.
    const refused = await viewer.request.post(`${base}queues`, {
      form: { do: 'pause', queue: 'orders', reason: 'x', csrf: 'guess' },
      headers: { origin: new URL(base).origin },
    });
    expect(refused.status()).toBe(403);
    await view.close();
    expect((await admin.listQueues()).find((q) => q.queue === 'orders')?.paused).toBe(false);
  });

  it('changes nothing when another site posts a form to it with the operator\u2019s browser', async () => {
    const target = `${base}queues`;
    evil = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(`<form id="f" method="post" action="${target}"><input name="do" value="pause"><input name="queue" value="orders">
        <input name="reason" value="forged"><input name="csrf" value="guessed"></form><script>document.getElementById('f').submit()</script>`);
    });
    await new Promise<void>((resolve) => evil?.listen(0, '127.0.0.1', resolve));
    const port = (evil.address() as AddressInfo).port;
    // Another site (localhost, not 127.0.0.1), then the same site on another port: both refused.
    for (const origin of [`http://localhost:${port}/`, `http://127.0.0.1:${port}/`]) {
      const attack = await operator.newPage();
      const answer = attack.waitForResponse((response) => response.url() === target);
      await attack.goto(origin);
      expect((await answer).status()).toBe(403);
      await attack.close();
    }
    expect((await admin.listQueues()).find((q) => q.queue === 'orders')?.paused).toBe(false);
  });

  it('shows hostile payloads, errors and tags as text, and runs none of it', async () => {
    await page.goto(`${base}jobs/${ids.hostile}`);
    const payload = (await page.locator('pre.json').first().textContent()) ?? '';
    const shown = (text: string) => payload.includes(text);
    expect([shown('<script>window.__pwned = \\"payload\\"</script>'), shown('<svg onload='), shown('onerror=')]).toEqual([true, true, true]);
    // Control characters are shown as escapes, never sent to the screen; the huge value is cut.
    expect([shown('\\u001b[2J'), shown('\u001b'), payload.length < 70_000]).toEqual([true, false, true]);
    expect(await page.locator('main').textContent()).toContain('Download the whole value');
    expect(await page.locator('pre.message').textContent()).toBe(HOSTILE_ERROR);
    expect(await page.locator('.tag').textContent()).toBe('<i>tag</i>');
    // Our one script and no other; no element the data could have added.
    expect(await page.locator('script').count()).toBe(1);
    expect(await page.locator('main img, main svg[onload], main b').count()).toBe(0);
    await page.locator('pre.message').hover();
    await page.goto(`${base}dead-letters?queue=webhooks`);
    expect(await page.locator('tbody td').nth(4).textContent()).toContain('</pre><script>');
    expect(await page.locator('main script').count()).toBe(0);
  });
  it('decides a human wait with its form, and the job goes on with the decision', async () => {
    const queue = new Queue(db.pool);
    const id = await queue.enqueue('refund.review', { orderId: 'A-1001', amountCents: 4200 }, { queue: 'refunds' });
    const worker = new Worker(queue, { queues: ['refunds'] }).handle('refund.review', async (payload: { amountCents: number }, ctx) => {
      const review = await ctx.waitForHuman<string>('approve-refund', {
        context: { customer: 'Ada Lovelace', amountCents: payload.amountCents, note: HOSTILE_PAYLOAD.html },
        choices: ['approve', 'reject'],
        timeoutMs: 86_400_000,
      });
      return { refund: review.decision, by: review.actor };
    });
    await worker.runOnce();
    // A signal no wait asked for, under a hostile name: buffered, and shown as text.
    const signal = '<img src=x onerror="window.__pwned=\'signal\'">';
    expect(await queue.sendSignal(id, signal, HOSTILE_PAYLOAD.attribute)).toBe('buffered');

    await page.goto(`${base}waits`);
    const card = page.locator('article.wait', { has: page.locator(`a[href="./jobs/${id}"]`) });
    await expect(card.locator('pre.json').textContent()).resolves.toContain('"customer": "Ada Lovelace"');
    const choices = card.locator('input[type="radio"]');
    expect(await Promise.all((await choices.all()).map((choice) => choice.getAttribute('value')))).toEqual(['approve', 'reject']);
    await shot('waits');

    await card.locator(`a[href="./jobs/${id}"]`).click();
    await page.waitForURL(`${base}jobs/${id}`);
    const section = page.locator('section.waits');
    const signals = section.locator('table').last().locator('tbody td');
    await expect(signals.nth(1).textContent()).resolves.toBe(signal);
    await expect(signals.nth(3).textContent()).resolves.toBe(JSON.stringify(HOSTILE_PAYLOAD.attribute));
    await shot('job-waits');
    const form = section.locator('form.decide');
    await form.getByLabel('reject').check();
    await form.getByLabel('Reason').fill('item never shipped back');
    await form.getByRole('button', { name: 'Decide' }).click();
    await page.waitForURL(`${base}jobs/${id}?notice=decided`);
    await expect(page.locator('.notice').textContent()).resolves.toContain('The decision is recorded');
    await expect(page.locator('.summary .state').textContent()).resolves.toBe('ready');
    await expect(section.locator('.wait-decided').textContent()).resolves.toBe('decided');
    expect(await page.locator('form.decide').count()).toBe(0);

    // A worker picks the job up again: the handler gets the decision and the job ends with it.
    await worker.runOnce();
    await page.reload();
    await expect(page.locator('.summary .state').textContent()).resolves.toBe('succeeded');
    await expect(page.locator('pre.json').nth(1).textContent()).resolves.toContain('"refund": "reject"');
    const decided = page.locator('section', { hasText: 'Timeline' }).locator('tbody tr', { hasText: 'human_decided' });
    await expect(decided.textContent()).resolves.toContain('actor="sample-operator" reason="item never shipped back"');
    // Beside the actor the form named, the login role of the dashboard's pool.
    const login = (await db.pool.query<{ login: string }>('SELECT session_user::text AS login')).rows[0].login;
    await expect(decided.locator('.login-role').textContent()).resolves.toBe(`login role ${login}`);
    await page.goto(`${base}waits`);
    expect(await page.locator(`article.wait a[href="./jobs/${id}"]`).count()).toBe(0);
  });

  it('shows a parent with its children, and follows a child to its parent', async () => {
    const queue = new Queue(db.pool);
    const parent = await queue.enqueue('report.build', { month: '2026-11' }, { queue: 'reports' });
    await new Worker(queue, { queues: ['reports'] })
      .handle('report.build', async (_payload, ctx) => {
        const parts = await ctx.runChildren('regions', ['north', 'south', 'west'].map((region) => ({ type: 'report.region', payload: { region } })));
        return { parts: parts.length };
      })
      .runOnce();
    const { children } = (await admin.getJob(parent)) ?? { children: [] };
    await page.goto(`${base}jobs/${parent}`);
    const family = page.locator('section.family');
    await expect(family.locator('h3', { hasText: 'Children' }).textContent()).resolves.toBe('Children (3)');
    expect(await family.locator('table a.id').allTextContents()).toEqual(children.map((child) => child.id));
    await shot('job-family');
    await family.locator(`a[href="../jobs/${children[1].id}"]`).first().click();
    await page.waitForURL(`${base}jobs/${children[1].id}`);
    await expect(page.locator('section.family').textContent()).resolves.toContain(`Started by the parent ${parent}`);
    await page.locator('section.family').locator(`a[href="../jobs/${parent}"]`).click();
    await page.waitForURL(`${base}jobs/${parent}`);
    await page.locator('section.family').getByRole('link', { name: 'The children in the job list' }).click();
    await page.waitForURL(`${base}jobs?parent=${parent}`);
    expect(await page.locator('tbody td.id').allTextContents()).toEqual(children.map((child) => child.id));
  });
});
