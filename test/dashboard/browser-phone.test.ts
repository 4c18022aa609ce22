/**
 * The dashboard in a real browser (headless Chromium) on a phone's screen, 390 px wide, in a time
 * zone far from UTC, over a real database: the overview's charts fit the screen with their axis
 * labels in view (a chart of 100,000 jobs a bucket too), every time on a page is in UTC like the
 * charts and the filters, and a decide form whose JSON is refused comes back with what was typed.
 *
 * With WORKHORSE_DASHBOARD_SCREENSHOTS=1 (`npm run dashboard:screenshots`) it also writes the
 * overview on a phone to docs/dashboard/overview-phone.png.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { NonRetryableError, Worker } from '../../lib/core';
import { barChart } from '../../lib/dashboard/charts';
import { createDashboardHandler } from '../../lib/dashboard/handler';
import { CHROMIUM, launchChromium } from '../support/chromium';
import { describeIf } from '../support/requirements';
import { useTestDatabase } from '../support/test-database';

const SCREENSHOTS = process.env.WORKHORSE_DASHBOARD_SCREENSHOTS ? join(__dirname, '../../docs/dashboard') : null;
const PHONE = { width: 390, height: 844 };
/** UTC+14: a browser here shows any time of the day on another date than UTC. */
const ZONE = 'Pacific/Kiritimati';

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

async function box(locator: Locator): Promise<Box> {
  const found = await locator.boundingBox();
  if (found === null) throw new Error('the element is not shown');
  return found;
}

const inside = (inner: Box, outer: Box): boolean =>
  inner.x >= outer.x - 0.5 && inner.y >= outer.y - 0.5 && inner.x + inner.width <= outer.x + outer.width + 0.5 && inner.y + inner.height <= outer.y + outer.height + 0.5;

const overlap = (a: Box, b: Box): boolean => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

describeIf(CHROMIUM, 'the dashboard on a phone, far from UTC', () => {
  const { queue, admin } = useTestDatabase({
    checkInvariants: false,
    beforeDrop: async () => {
      await browser?.close();
      await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    },
  });
  let browser: Browser;
  let server: Server | undefined;
  let page: Page;
  let base: string;
  let parked: string;

  /** The labels of every chart on the page are inside their chart's box, and no two overlap. */
  async function expectChartsFit(): Promise<void> {
    const charts = await page.locator('figure.chart').all();
    expect(charts.length).toBeGreaterThan(0);
    for (const chart of charts) {
      const frame = await box(chart);
      expect(frame.x).toBeGreaterThanOrEqual(0);
      expect(frame.x + frame.width).toBeLessThanOrEqual(PHONE.width);
      const labels = await Promise.all((await chart.locator('text.axis').all()).map(async (label) => ({ text: await label.textContent(), box: await box(label) })));
      for (const label of labels) expect([label.text, inside(label.box, frame)]).toEqual([label.text, true]);
      for (const [i, a] of labels.entries()) for (const b of labels.slice(i + 1)) expect([a.text, b.text, overlap(a.box, b.box)]).toEqual([a.text, b.text, false]);
    }
    // Nothing on the page is wider than the screen.
    expect(await page.locator('html').evaluate((element) => element.scrollWidth)).toBeLessThanOrEqual(PHONE.width);
  }

  beforeAll(async () => {
    const handler = createDashboardHandler({ admin, path: '/workhorse', authorize: () => true, actor: () => 'phone-operator' });
    server = createServer((request, response) => void handler(request, response));
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/workhorse/`;

    await queue.enqueueMany(Array.from({ length: 6 }, (_, n) => ({ type: n % 3 === 0 ? 'photo.broken' : 'photo.resize', payload: { n }, queue: 'photos' })));
    parked = await queue.enqueue('refund.amount', { order: 'A-7' }, { queue: 'refunds' });
    const worker = new Worker(queue, { queues: ['photos', 'refunds'], concurrency: 4 })
      .handle('photo.resize', () => ({ ok: true }))
      .handle('photo.broken', () => {
        throw new NonRetryableError('not an image');
      })
      .handle('refund.amount', async (_payload, ctx) => (await ctx.waitForHuman<{ cents: number }>('amount', { context: { asked: 'how much to refund' } })).decision);
    while ((await worker.runOnce()) > 0);

    browser = await launchChromium();
    const context = await browser.newContext({ viewport: PHONE, timezoneId: ZONE });
    page = await context.newPage();
  }, 120_000);

  it('fits the overview and its charts to a 390 px screen, every axis label in view', async () => {
    for (const window of ['1h', '24h', '7d']) {
      await page.goto(`${base}?window=${window}`);
      expect(await page.locator('.chart svg rect.fill-succeeded').count()).toBeGreaterThan(0);
      await expectChartsFit();
    }
    await page.goto(base);
    if (SCREENSHOTS) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: join(SCREENSHOTS, 'overview-phone.png'), fullPage: true });
    }
  });

  it('labels the axis of a chart of 100,000 and of 2,500,000 jobs a bucket in full view', async () => {
    const buckets = Array.from({ length: 60 }, (_, i) => new Date(Date.UTC(2026, 10, 30, 23, i)));
    const chart = (peak: number) =>
      barChart({ title: `up to ${peak}`, buckets, bucketSeconds: 60, series: [{ label: 'succeeded', className: 'fill-succeeded', values: buckets.map((_, i) => (i === 30 ? peak : i * 10)) }] });
    const css = readFileSync(join(__dirname, '../../lib/dashboard/assets/dashboard.css'), 'utf8');
    // A blank page first: content written into a dashboard page would be under its CSP, which refuses inline styles.
    await page.goto('about:blank');
    await page.setContent(`<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1"><style>${css}</style></head>
      <body><main><section class="charts"><div>${chart(100_000).toString()}</div><div>${chart(2_500_000).toString()}</div></section></main></body></html>`);
    expect(await page.locator('text.axis').allTextContents()).toEqual(['0', '50k', '100k', '23:00', '23:29', '23:59 UTC', '0', '2.5M', '5M', '23:00', '23:29', '23:59 UTC']);
    await expectChartsFit();
    // The bar's tooltip gives the whole number.
    expect(await page.locator('figure.chart').first().locator('title').nth(30).textContent()).toBe('2026-11-30 23:30:00 UTC: 100,000 succeeded');
  });

  it('shows every time in UTC, as the charts and the time filters are, whatever the browser\u2019s zone', async () => {
    const utc = (iso: string) => `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
    for (const path of ['jobs', 'dead-letters', `jobs/${parked}`, 'waits']) {
      await page.goto(`${base}${path}`);
      const times = await page.locator('time').evaluateAll((elements) => elements.map((element) => [element.getAttribute('datetime') ?? '', element.textContent ?? '']));
      expect(times.length).toBeGreaterThan(0);
      expect(times.map(([, text]) => text)).toEqual(times.map(([iso]) => utc(iso)));
    }
    await page.goto(base);
    // A chart's times say their zone once, after the last one.
    const times = await page.locator('figure.chart').first().locator('text.axis').allTextContents();
    expect(times.filter((label) => label.includes(':')).map((label) => label.endsWith(' UTC'))).toEqual([false, false, true]);
  });

  it('keeps what was typed in a decide form whose JSON is refused, and records it once corrected', async () => {
    await page.goto(`${base}waits?queue=refunds`);
    const form = page.locator('form.decide');
    await form.getByLabel('Decision (JSON)').fill('{"cents": 1200,}');
    await form.getByLabel('Reason').fill('damaged in transit');
    await form.getByRole('button', { name: 'Decide' }).click();
    await page.waitForURL(`${base}waits`);
    await expect(page.locator('p.error').textContent()).resolves.toContain('The decision must be JSON');
    const again = page.locator('form.decide');
    await expect(again.getByLabel('Decision (JSON)').inputValue()).resolves.toBe('{"cents": 1200,}');
    await expect(again.getByLabel('Reason').inputValue()).resolves.toBe('damaged in transit');
    expect((await admin.getJobTimeline(parked)).items.filter((entry) => entry.kind === 'human_decided')).toEqual([]);

    await again.getByLabel('Decision (JSON)').fill('{"cents": 1200}');
    await again.getByRole('button', { name: 'Decide' }).click();
    await page.waitForURL(`${base}jobs/${parked}?notice=decided`);
    const decided = (await admin.getJobTimeline(parked)).items.filter((entry) => entry.kind === 'human_decided');
    expect(decided.map((entry) => entry.data)).toEqual([expect.objectContaining({ decision: { cents: 1200 }, actor: 'phone-operator', reason: 'damaged in transit' })]);
  });
});
