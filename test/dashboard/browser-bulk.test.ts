/**
 * Bulk actions of the jobs page in a real browser (headless Chromium) against the sample
 * application and a real database: "every job that matches this filter" and a selection of
 * rows, each previewed by a dry run that changes nothing, then confirmed with a reason that is
 * recorded with every job; a viewer without the change rights gets no controls.
 *
 * With WORKHORSE_DASHBOARD_SCREENSHOTS=1 (`npm run dashboard:screenshots`) it also writes
 * screenshots of the preview and of the selection to docs/dashboard/.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { Browser, Page } from 'playwright-core';
import { CHROMIUM, launchChromium } from '../support/chromium';
import { describeIf } from '../support/requirements';
import { operatorPage, startSampleDashboard } from '../support/sample-dashboard';
import { useTestDatabase } from '../support/test-database';

const TOKEN = 'browser-bulk-token';
const SCREENSHOTS = process.env.WORKHORSE_DASHBOARD_SCREENSHOTS ? join(__dirname, '../../docs/dashboard') : null;
const LATER = () => new Date(Date.now() + 3_600_000);

describeIf(CHROMIUM, 'bulk actions on the jobs page in Chromium', () => {
  const { db, queue, admin } = useTestDatabase({
    checkInvariants: false,
    beforeDrop: async () => {
      await browser?.close();
      await app?.close();
    },
  });
  let app: INestApplication;
  let browser: Browser;
  let page: Page;
  let base: string;
  let origin: string;
  const dialogs: string[] = [];

  async function shot(name: string): Promise<void> {
    if (!SCREENSHOTS) return;
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  }

  beforeAll(async () => {
    const dashboard = await startSampleDashboard(db, 'dashboard-bulk', TOKEN);
    ({ app, base, origin } = dashboard);
    browser = await launchChromium();
    ({ page } = await operatorPage(browser, dashboard, TOKEN, dialogs, 'accept'));
  }, 120_000);

  it('previews "every job that matches this filter" without writing, then cancels them with the reason recorded', async () => {
    const ids = await queue.enqueueMany([1, 2, 3, 4, 5].map((n) => ({ type: 'newsletter.send', payload: { n }, queue: 'bulk-mail', runAt: LATER() })));
    const other = await queue.enqueue('receipt.send', {}, { queue: 'bulk-mail', runAt: LATER() });
    await page.goto(`${base}jobs?queue=bulk-mail&type=newsletter.send`);
    expect(await page.locator('input[name="id"]').count()).toBe(5);
    const all = page.locator('form.bulk-all');
    await all.locator('select[name="verb"]').selectOption('cancel');
    await all.getByRole('button', { name: 'Preview for all that match' }).click();
    await page.locator('#bulk-count').waitFor();
    expect(await page.locator('#bulk-count').getAttribute('data-matched')).toBe('5');
    expect(await page.locator('#bulk-count').textContent()).toContain('This is a dry run: nothing has been written. 5 jobs would be canceled.');
    await shot('bulk-preview');
    for (const id of ids) expect((await admin.getJob(id))?.state).toBe('scheduled');

    await page.getByLabel('Reason').fill('wrong template');
    await page.getByRole('button', { name: 'Cancel 5 jobs' }).click();
    await page.locator('#bulk-done').waitFor();
    expect(await page.locator('#bulk-done').getAttribute('data-changed')).toBe('5');
    for (const id of ids) {
      expect(await admin.getJob(id)).toMatchObject({ state: 'canceled', error: { name: 'Canceled', message: 'wrong template', actor: 'sample-operator' } });
    }
    expect((await admin.getJob(other))?.state).toBe('scheduled');
  });

  it('runs the selected rows now and deletes finished ones, skipping what the action does not apply to', async () => {
    const [first, second] = await queue.enqueueMany([1, 2].map((n) => ({ type: 'report.build', payload: { n }, queue: 'bulk-run', runAt: LATER() })));
    await page.goto(`${base}jobs?queue=bulk-run`);
    await page.getByLabel(`Select ${first}`).check();
    const selection = page.locator('form.selection');
    await selection.locator('select[name="verb"]').selectOption('run-now');
    await shot('bulk-selection');
    await selection.getByRole('button', { name: 'Preview for the selected' }).click();
    expect(await page.locator('#bulk-count').getAttribute('data-matched')).toBe('1');
    await page.getByLabel('Reason').fill('customer waiting');
    await page.getByRole('button', { name: 'Run now 1 job' }).click();
    await page.locator('#bulk-done').waitFor();
    expect((await admin.getJob(first))?.state).toBe('ready');
    expect((await admin.getJob(second))?.state).toBe('scheduled');
    const { rows } = await db.pool.query("SELECT data FROM workhorse.job_event WHERE job_id = $1 AND kind = 'run_now'", [first]);
    expect(rows[0].data).toMatchObject({ actor: 'sample-operator', reason: 'customer waiting' });

    // Delete every job of the queue: the two live ones are left alone and counted.
    await page.goto(`${base}jobs?queue=bulk-mail`);
    const all = page.locator('form.bulk-all');
    await all.locator('select[name="verb"]').selectOption('delete');
    await all.getByRole('button', { name: 'Preview for all that match' }).click();
    expect(await page.locator('#bulk-count').getAttribute('data-matched')).toBe('5');
    expect(await page.locator('#bulk-skipped').textContent()).toContain('1 scheduled');
    await page.getByLabel('Reason').fill('incident clean-up');
    await page.getByRole('button', { name: 'Delete 5 jobs' }).click();
    expect(await page.locator('#bulk-done').getAttribute('data-changed')).toBe('5');
    expect((await admin.listJobs({ queue: 'bulk-mail' })).items).toHaveLength(1);
  });

  it('runs one job now and deletes a finished one from the job page', async () => {
    const id = await queue.enqueue('report.build', {}, { queue: 'bulk-one', runAt: LATER() });
    await page.goto(`${base}jobs/${id}`);
    const runNow = page.locator('form', { has: page.getByRole('button', { name: 'Run now' }) });
    await runNow.getByLabel('Reason').fill('customer on the phone');
    await runNow.getByRole('button', { name: 'Run now' }).click();
    await page.getByText('The job is ready now').waitFor();
    expect((await admin.getJob(id))?.state).toBe('ready');

    await admin.cancel(id, { reason: 'test' });
    await page.goto(`${base}jobs/${id}`);
    const remove = page.locator('form', { has: page.getByRole('button', { name: 'Delete job' }) });
    await remove.getByLabel('Reason').fill('clean-up');
    await remove.getByRole('button', { name: 'Delete job' }).click();
    await page.getByText('The job is deleted').waitFor();
    expect(await admin.getJob(id)).toBeNull();
  });

  it('gives a viewer without the change rights no selection and refuses a forged preview', async () => {
    await queue.enqueue('newsletter.send', {}, { queue: 'bulk-viewer', runAt: LATER() });
    const viewer = await browser.newPage();
    try {
      await viewer.goto(`${base}jobs?queue=bulk-viewer`);
      await viewer.locator('tbody tr').first().waitFor();
      expect(await viewer.locator('input[name="id"]').count()).toBe(0);
      expect(await viewer.locator('form.bulk-all').count()).toBe(0);
      const response = await viewer.request.post(`${base}jobs`, { form: { do: 'preview-all', verb: 'cancel', queue: 'bulk-viewer' }, headers: { origin } });
      expect(response.status()).toBe(403);
    } finally {
      await viewer.close();
    }
    expect((await admin.listJobs({ queue: 'bulk-viewer', states: ['scheduled'] })).items).toHaveLength(1);
  });
});
