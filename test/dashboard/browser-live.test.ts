/**
 * The dashboard in an incident, in a real browser (headless Chromium) against the sample
 * application and a real database: pages change by themselves (and stop when paused or hidden,
 * keeping what the user types), a job is found by id and by payload, the timings page draws its
 * percentiles and groups failures, dark mode follows the system and a remembered toggle, and the
 * read-only JSON API answers scripts.
 *
 * With WORKHORSE_DASHBOARD_SCREENSHOTS=1 (`npm run dashboard:screenshots`) it also writes
 * docs/dashboard/timings.png, jobs-search.png and overview-dark.png.
 */
import { mkdirSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { NonRetryableError, Worker } from '../../lib/core';
import { CHROMIUM, launchChromium } from '../support/chromium';
import { describeIf } from '../support/requirements';
import { operatorPage, startSampleDashboard, type SampleDashboard } from '../support/sample-dashboard';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const TOKEN = 'browser-live-token';
const SCREENSHOTS = process.env.WORKHORSE_DASHBOARD_SCREENSHOTS ? join(__dirname, '../../docs/dashboard') : null;

describeIf(CHROMIUM, 'the dashboard in an incident, in Chromium', () => {
  const { db, queue } = useTestDatabase({
    checkInvariants: false,
    beforeDrop: async () => {
      await browser?.close();
      await app?.close();
    },
  });
  let app: INestApplication;
  let dashboard: SampleDashboard;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let base: string;
  const dialogs: string[] = [];
  const ids: { order?: string; failed?: string } = {};

  async function shot(name: string, target: Page = page): Promise<void> {
    if (!SCREENSHOTS) return;
    mkdirSync(SCREENSHOTS, { recursive: true });
    await target.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  }

  /** Live requests the page sends (the refreshes of dashboard.js). */
  const liveRequests: string[] = [];

  beforeAll(async () => {
    dashboard = await startSampleDashboard(db, 'dashboard-live', TOKEN);
    ({ app, base } = dashboard);
    const requests: { type: string; payload: { orderId: number; region: string }; queue: string; tags: string[] }[] = [
      ...Array.from({ length: 6 }, (_, i) => ({ type: 'report.build', payload: { orderId: 1000 + i, region: 'eu' }, queue: 'reports', tags: ['batch-7'] })),
      { type: 'report.broken', payload: { orderId: 4242, region: 'us' }, queue: 'reports', tags: ['batch-7'] },
    ];
    const jobs = await queue.enqueueMany(requests);
    ids.order = jobs[3];
    ids.failed = jobs[6];
    const worker = new Worker(queue, { queues: ['reports'], concurrency: 2 })
      .handle('report.build', async () => {
        await new Promise((resolve) => setTimeout(resolve, 30));
        return { pages: 3 };
      })
      .handle('report.broken', () => {
        throw new NonRetryableError('template missing: invoice.hbs');
      });
    while ((await worker.runOnce()) > 0);
    browser = await launchChromium();
    ({ context, page } = await operatorPage(browser, dashboard, TOKEN, dialogs, 'accept'));
    page.on('request', (request) => {
      if (request.headers()['x-workhorse-live'] === '1') liveRequests.push(request.url());
    });
  }, 120_000);

  it('updates the jobs page by itself, keeps what the user types, pauses, and stops while the tab is hidden', async () => {
    await page.goto(`${base}jobs?queue=live`);
    await page.selectOption('#live-interval', '2');
    await expect(page.locator('#live-body tbody tr').count()).resolves.toBe(0);
    // A marker in the window: a reload or a navigation would lose it.
    await page.evaluate('window.__kept = "yes"');
    await page.fill('input[name="type"]', 'typed but not sent');
    const id = await queue.enqueue('live.thing', { n: 1 }, { queue: 'live' });
    await waitFor(async () => (await page.locator(`#live-body tr[data-job="${id}"]`).count()) === 1, 15_000, 'the page to change by itself');
    await expect(page.evaluate('window.__kept')).resolves.toBe('yes');
    await expect(page.inputValue('input[name="type"]')).resolves.toBe('typed but not sent');
    await expect(page.textContent('#live-state')).resolves.toContain('Live');

    // Paused: no refresh, the new job does not appear.
    await page.click('#live-pause');
    await expect(page.textContent('#live-state')).resolves.toBe('Paused');
    const second = await queue.enqueue('live.thing', { n: 2 }, { queue: 'live' });
    const before = liveRequests.length;
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    expect(liveRequests.length).toBe(before);
    await expect(page.locator(`tr[data-job="${second}"]`).count()).resolves.toBe(0);
    await page.click('#live-pause');
    await waitFor(async () => (await page.locator(`tr[data-job="${second}"]`).count()) === 1, 15_000, 'the page to change by itself');

    // Hidden (another tab in front): no request at all until it is shown again.
    await page.evaluate("Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' }); document.dispatchEvent(new Event('visibilitychange'))");
    await expect(page.textContent('#live-state')).resolves.toContain('hidden');
    const hidden = liveRequests.length;
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    expect(liveRequests.length).toBe(hidden);
    await page.evaluate("Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'visible' }); document.dispatchEvent(new Event('visibilitychange'))");
    await waitFor(() => liveRequests.length > hidden, 5_000, 'a refresh once the tab is shown');
  }, 60_000);

  it('updates the overview and the queues page by themselves', async () => {
    await page.goto(`${base}queues`);
    await page.selectOption('#live-interval', '2');
    const ready = page.locator('#live-body tbody tr', { has: page.getByText('surge', { exact: true }) });
    await expect(ready.count()).resolves.toBe(0);
    await queue.enqueueMany([1, 2, 3].map((n) => ({ type: 'surge.job', payload: { n }, queue: 'surge' })));
    await waitFor(async () => (await ready.count()) === 1, 15_000, 'the page to change by itself');
    await expect(ready.locator('td').nth(5).textContent()).resolves.toBe('3');
  }, 30_000);

  it('opens a job from its id in the search box, and finds jobs by payload, tag and error', async () => {
    await page.goto(`${base}jobs`);
    await page.fill('input[name="q"]', ` ${ids.order?.toUpperCase() ?? ''} `);
    await page.click('form.search button');
    await page.waitForURL(`${base}jobs/${ids.order}`);
    await expect(page.locator('h1').textContent()).resolves.toContain('report.build');

    await page.goto(`${base}jobs`);
    await page.fill('input[name="payload"]', '{"orderId": 4242}');
    await page.click('form.filters button[type="submit"]');
    await expect(page.locator('#listing-source').getAttribute('data-source')).resolves.toBe('find');
    const rows = page.locator('#live-body tbody tr');
    await expect(rows.count()).resolves.toBe(1);
    await expect(rows.first().getAttribute('data-job')).resolves.toBe(ids.failed);
    // The failure's error in its row, with the run time of its attempt.
    await expect(rows.first().locator('td.error-text').textContent()).resolves.toBe('NonRetryableError: template missing: invoice.hbs');
    await expect(rows.first().locator('td[data-col="run"]').textContent()).resolves.toMatch(/ms$/);
    await shot('jobs-search');

    await page.goto(`${base}jobs?tag=batch-7`);
    await expect(page.locator('#live-body tbody tr').count()).resolves.toBe(7);
    await page.goto(`${base}jobs?error=${encodeURIComponent('invoice.hbs')}`);
    await expect(page.locator('#live-body tbody tr').count()).resolves.toBe(1);
    // A payload that is not JSON is named next to the form.
    await page.goto(`${base}jobs?payload=${encodeURIComponent('orderId=4242')}`);
    await expect(page.locator('form.filters .error').textContent()).resolves.toContain('payload');
    // Failed alone: read from the failures' index, newest failure first.
    await page.goto(`${base}jobs?state=failed`);
    await expect(page.locator('#listing-source').getAttribute('data-source')).resolves.toBe('failed');
    await expect(page.locator(`#live-body tr[data-job="${ids.failed}"]`).count()).resolves.toBe(1);
  });

  it('draws run and wait time percentiles per queue and type, and groups failures by error', async () => {
    await page.goto(`${base}timings`);
    const reports = page.locator('#run-times g[data-name="reports"]');
    await expect(reports.locator('rect').count()).resolves.toBe(3);
    await expect(reports.textContent()).resolves.toContain('7 attempts');
    await expect(page.locator('#wait-times g[data-name="reports"] rect').count()).resolves.toBe(3);
    const group = page.locator('#error-groups tbody tr').first();
    await expect(group.locator('td').nth(0).textContent()).resolves.toBe('NonRetryableError');
    await expect(group.locator('td').nth(2).textContent()).resolves.toBe('1');
    await page.click('text=per type');
    await expect(page.locator('#run-times g[data-name="report.build"] text').first().textContent()).resolves.toContain('6 attempts');
    await shot('timings');
  });

  it('fits the timings chart on a 390 px phone', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    await phone.goto(`${base}timings`);
    const box = await phone.locator('#run-times svg').boundingBox();
    expect(box?.width).toBeLessThanOrEqual(390);
    expect(box?.width).toBeGreaterThan(250);
    await expect(phone.evaluate('document.documentElement.scrollWidth')).resolves.toBeLessThanOrEqual(390);
    await phone.close();
  });

  it('follows the system in dark mode, and a toggle that is remembered', async () => {
    const background = () => page.evaluate('getComputedStyle(document.body).backgroundColor');
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.goto(base);
    await expect(background()).resolves.toBe('rgb(22, 24, 27)');
    await page.emulateMedia({ colorScheme: 'light' });
    await expect(background()).resolves.toBe('rgb(247, 247, 245)');
    await expect(page.textContent('#theme-toggle')).resolves.toBe('Theme: system');
    await page.click('#theme-toggle');
    await expect(page.textContent('#theme-toggle')).resolves.toBe('Theme: dark');
    await expect(background()).resolves.toBe('rgb(22, 24, 27)');
    await page.goto(`${base}queues`);
    await expect(background()).resolves.toBe('rgb(22, 24, 27)');
    await page.goto(base);
    await shot('overview-dark');
    await page.click('#theme-toggle');
    await expect(background()).resolves.toBe('rgb(247, 247, 245)');
    await page.click('#theme-toggle');
    await expect(page.textContent('#theme-toggle')).resolves.toBe('Theme: system');
  });

  it('sorts the queues page by a column, and back', async () => {
    await page.goto(`${base}queues`);
    await page.click('th a.sort:text("Ready")');
    await expect(page.locator('th a.sort[aria-sort]').textContent()).resolves.toBe('Ready ▼');
    await expect(page.locator('#live-body tbody tr').first().locator('td').first().textContent()).resolves.toBe('surge');
    await page.click('th a.sort:text("Queue")');
    await expect(page.locator('th a.sort[aria-sort="ascending"]').textContent()).resolves.toBe('Queue ▲');
  });

  it('answers scripts in JSON without a form token: jobs, a job, queues, health; it never changes anything', async () => {
    const job = await context.request.get(`${base}api/jobs/${ids.failed}`);
    expect(job.status()).toBe(200);
    expect(job.headers()['content-type']).toBe('application/json; charset=utf-8');
    const body = (await job.json()) as { id: string; state: string; payload: unknown; error: { name: string }; timing: { runMs: number } };
    expect(body).toMatchObject({ id: ids.failed, state: 'failed', payload: { orderId: 4242, region: 'us' }, error: { name: 'NonRetryableError' } });
    expect(body.timing.runMs).toBeGreaterThanOrEqual(0);

    const list = (await (await context.request.get(`${base}api/jobs?queue=reports&limit=2`)).json()) as { items: { queue: string }[]; nextCursor: string | null };
    expect(list.items.map((item) => item.queue)).toEqual(['reports', 'reports']);
    expect(list.nextCursor).not.toBeNull();
    const found = (await (await context.request.get(`${base}api/jobs?payload=${encodeURIComponent('{"orderId":1003}')}`)).json()) as { items: { id: string }[] };
    expect(found.items.map((item) => item.id)).toEqual([ids.order]);
    await queue.enqueue('scripted.job', {}, { queue: 'scripted' });
    const queues = (await (await context.request.get(`${base}api/queues`)).json()) as { items: { queue: string; ready: number }[] };
    expect(queues.items.find((q) => q.queue === 'scripted')).toMatchObject({ ready: 1 });
    const health = (await (await context.request.get(`${base}api/health`)).json()) as { status: string };
    expect(['ok', 'warn', 'critical']).toContain(health.status);

    // Bad input: a 400 naming the field; an unknown job: a 404; a POST: a 405, and nothing changed.
    const bad = await context.request.get(`${base}api/jobs?limit=5000`);
    expect(bad.status()).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { status: 400, field: 'limit' } });
    expect((await context.request.get(`${base}api/jobs/00000000-0000-7000-8000-000000000000`)).status()).toBe(404);
    const post = await context.request.post(`${base}api/jobs/${ids.order}`, { form: { do: 'cancel', reason: 'script' } });
    expect(post.status()).toBe(405);
    expect(await post.json()).toMatchObject({ error: { status: 405 } });

    // A viewer without read-data (the sample lets everyone read) sees no payload, and is told so.
    const anonymous = await browser.newContext();
    const hidden = (await (await anonymous.request.get(`${base}api/jobs/${ids.failed}`)).json()) as { payload: unknown; hidden: string[] };
    expect(hidden.payload).toBeNull();
    expect(hidden.hidden).toEqual(['payload', 'result', 'progress']);
    // Searching by payload would reveal payloads: refused without read-data.
    expect((await anonymous.request.get(`${base}api/jobs?payload=${encodeURIComponent('{"orderId":1003}')}`)).status()).toBe(403);
    await anonymous.close();

    // The host allow-list holds for the API as for the pages.
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(`${base}api/health`);
      const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, headers: { Host: 'rebound.example' } }, (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(421);
  });
});
