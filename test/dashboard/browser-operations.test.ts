/**
 * The operations pages in a real browser (headless Chromium) against the real sample application
 * and a real database: the overview shows the health and its reasons; a schedule is paused,
 * resumed and triggered (the new job opens); a worker is drained; a queue's limits are set; a
 * schedule's hostile payload shows as text and never runs.
 *
 * With WORKHORSE_DASHBOARD_SCREENSHOTS=1 (`npm run dashboard:screenshots`) it also writes a
 * screenshot of each of these pages to docs/dashboard/.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { Browser, Page } from 'playwright-core';
import { Worker } from '../../lib/core';
import { CHROMIUM, launchChromium } from '../support/chromium';
import { describeIf } from '../support/requirements';
import { operatorPage, startSampleDashboard } from '../support/sample-dashboard';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const TOKEN = 'browser-operations-token';
const SCREENSHOTS = process.env.WORKHORSE_DASHBOARD_SCREENSHOTS ? join(__dirname, '../../docs/dashboard') : null;
const HOSTILE = '<script>window.__pwned = "schedule"</script><img src=x onerror="window.__pwned=\'img\'">';
const NIGHTLY = 'reports.nightly';

describeIf(CHROMIUM, 'the operations pages in Chromium', () => {
  const { db, queue, admin } = useTestDatabase({
    checkInvariants: false,
    beforeDrop: async () => {
      await Promise.all(workers.map((worker) => worker.stop()));
      await browser?.close();
      await app?.close();
    },
  });
  let app: INestApplication;
  let browser: Browser;
  let page: Page;
  let base: string;
  const workers: Worker[] = [];
  const dialogs: string[] = [];

  async function shot(name: string): Promise<void> {
    if (!SCREENSHOTS) return;
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  }

  const pwned = () => page.evaluate(() => (globalThis as unknown as { __pwned?: unknown }).__pwned ?? null);

  function startWorker(queues: string[], concurrency: number): Worker {
    const worker = new Worker(queue, { queues, concurrency, heartbeatMs: 200, tickMs: 200 });
    workers.push(worker);
    void worker.run();
    return worker;
  }

  /** Opens a row's changes (a click on their summary), unless they are open already. */
  async function expand(container: ReturnType<Page['locator']>): Promise<void> {
    const details = container.locator('details');
    if (!(await details.evaluate((element) => element.hasAttribute('open')))) await details.locator('summary').click();
  }

  const row = (text: string) => page.locator('tbody tr', { has: page.getByText(text, { exact: true }) });

  beforeAll(async () => {
    const dashboard = await startSampleDashboard(db, 'dashboard-operations', TOKEN);
    ({ app, base } = dashboard);
    await queue.syncSchedules('reports', [
      { key: NIGHTLY, type: 'report.build', cron: '0 6 * * *', timezone: 'Europe/Berlin', payload: { format: 'pdf', note: HOSTILE }, options: { queue: 'reports' } },
      { key: 'reports.hourly', type: 'report.refresh', cron: '@hourly', options: { queue: 'reports' } },
    ]);
    await queue.syncSchedules('billing', [{ key: 'invoices.monthly', type: 'invoice.run', cron: '0 2 1 * *', options: { queue: 'billing' } }]);
    // Ready jobs and no worker registered: a health reason.
    await queue.enqueueMany([1, 2, 3].map((n) => ({ type: 'mail.send', payload: { n }, queue: 'mail' })));
    browser = await launchChromium();
    ({ page } = await operatorPage(browser, dashboard, TOKEN, dialogs, 'accept'));
  }, 120_000);

  afterEach(async () => {
    expect(await pwned()).toBeNull();
  });

  it('shows the health on the overview: its level and each reason with what it means', async () => {
    await page.goto(base);
    await expect(page.locator('#health h2 .health').textContent()).resolves.toBe('warn');
    const reason = page.locator('#health tr[data-reason="ready_without_workers"]');
    await expect(reason.textContent()).resolves.toContain('ready jobs and no worker registered as running');
    await expect(reason.locator('td').nth(2).textContent()).resolves.toBe('3');
    if (SCREENSHOTS) await page.locator('#health').screenshot({ path: join(SCREENSHOTS, 'health.png') });
  });

  it('pauses, resumes and triggers a schedule, recording the operator and the reason', async () => {
    await page.goto(`${base}schedules`);
    const nightly = row(NIGHTLY);
    await expect(nightly.locator('code').first().textContent()).resolves.toBe('0 6 * * *');
    await expect(nightly.textContent()).resolves.toContain('Europe/Berlin');
    // The payload is shown as text: the script and the image are characters on the page.
    await expect(nightly.locator('code.small').textContent()).resolves.toContain('<script>window.__pwned');
    if (SCREENSHOTS) await nightly.locator('details').evaluate((details) => details.setAttribute('open', ''));
    await shot('schedules');

    await expand(nightly);
    await nightly.getByLabel('Reason').first().fill('month-end freeze');
    await nightly.getByRole('button', { name: 'Pause' }).click();
    await expect(page.locator('.notice').textContent()).resolves.toContain('The schedule is paused');
    await expect(nightly.locator('.health-paused').textContent()).resolves.toBe('paused');
    await expect(nightly.textContent()).resolves.toContain('by sample-operator');
    const paused = (await admin.listSchedules({ namespace: 'reports' })).find((s) => s.key === NIGHTLY);
    expect(paused).toMatchObject({ state: 'paused', pausedBy: 'sample-operator', pauseReason: 'month-end freeze' });

    await expect(nightly.locator('summary').textContent()).resolves.toBe('Resume, trigger…');
    await expand(nightly);
    await nightly.getByLabel('Reason').first().fill('books closed');
    await nightly.getByRole('button', { name: 'Resume' }).click();
    await expect(page.locator('.notice').textContent()).resolves.toContain('The schedule is resumed');
    await expect(nightly.locator('.health-ok').textContent()).resolves.toBe('active');

    await expand(nightly);
    await nightly.getByLabel('Reason').last().fill('rerun after the fix');
    await nightly.getByRole('button', { name: 'Trigger now' }).click();
    await page.waitForURL(/\/jobs\/[0-9a-f-]{36}\?notice=triggered$/);
    await expect(page.locator('.notice').textContent()).resolves.toContain('enqueued by triggering its schedule now');
    await expect(page.locator('.summary').textContent()).resolves.toContain('report.build');
    const triggered = page.locator('section', { hasText: 'Timeline' }).locator('tbody tr', { hasText: 'schedule_triggered' });
    await expect(triggered.textContent()).resolves.toContain('actor="sample-operator"');
    const jobId = /jobs\/([0-9a-f-]{36})/.exec(page.url())?.[1];
    expect((await admin.getJob(jobId as string))?.state).toBe('ready');

    // The schedule's history holds the reason of each change, and links the triggered job.
    await page.goto(`${base}schedules`);
    await row(NIGHTLY).getByRole('link', { name: NIGHTLY }).click();
    const history = page.locator('tbody tr');
    await expect(history.first().textContent()).resolves.toContain('rerun after the fix');
    await expect(history.first().locator('a.id').textContent()).resolves.toBe(jobId);
    expect(await history.allTextContents()).toEqual(
      expect.arrayContaining([expect.stringContaining('month-end freeze'), expect.stringContaining('books closed')]),
    );
  });

  it('drains a worker, after a confirmation, and shows it drained', async () => {
    const worker = startWorker(['mail', 'reports'], 4);
    if (SCREENSHOTS) startWorker(['billing'], 2);
    await waitFor(async () => (await admin.listWorkers()).some((w) => w.workerId === worker.workerId), 10_000, 'the worker to register');
    await page.goto(`${base}workers`);
    const line = row(worker.workerId);
    await expect(line.locator('.health').textContent()).resolves.toBe('running');
    await expect(line.textContent()).resolves.toContain('mail');
    await expand(line);
    await shot('workers');
    await line.getByLabel('Reason').fill('host maintenance');
    await line.getByRole('button', { name: 'Drain' }).click();
    await expect(page.locator('.notice').textContent()).resolves.toContain('Drain requested');
    expect(dialogs).toEqual(['Drain this worker? It stops claiming for good; restart its process to undo.']);
    await waitFor(async () => (await admin.listWorkers()).find((w) => w.workerId === worker.workerId)?.status === 'drained', 10_000, 'the worker to drain');
    await page.reload();
    await expect(line.locator('.health').textContent()).resolves.toBe('drained');
    await expect(line.textContent()).resolves.toContain('host maintenance');
    expect(await line.locator('details').count()).toBe(0);
  });

  it('sets a queue\u2019s limits from the queues page', async () => {
    await page.goto(`${base}queues`);
    const mail = page.locator('tr', { has: page.locator('a', { hasText: /^mail$/ }) });
    await expand(mail);
    await mail.getByLabel('At most active', { exact: true }).fill('2');
    await mail.getByLabel('Claims per window').fill('10');
    await mail.getByLabel('Window (ms)').fill('1000');
    await mail.locator('details').getByLabel('Reason').fill('protect the SMTP relay');
    await mail.getByRole('button', { name: 'Set limits' }).click();
    await expect(page.locator('.notice').textContent()).resolves.toContain('limits are set');
    await expect(mail.textContent()).resolves.toContain('at most 2 active, 10 per 1000 ms');
    expect((await admin.listQueues()).find((q) => q.queue === 'mail')).toMatchObject({ concurrency: 2, rateLimit: { limit: 10, intervalMs: 1000 } });
  });
});
