/**
 * The sample application with its dashboard, for the browser tests: served on a free port of
 * 127.0.0.1 without a worker, and a browser page signed in as its operator.
 */
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { AppModule } from '../../sample-app/app.module';
import type { TestDatabase } from './db';

export interface SampleDashboard {
  app: INestApplication;
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** The dashboard's URL, with its trailing slash. */
  base: string;
}

export async function startSampleDashboard(db: TestDatabase, applicationName: string, operatorToken: string): Promise<SampleDashboard> {
  const app = await NestFactory.create(AppModule.register({ databaseUrl: db.url, applicationName, worker: false, dashboard: { operatorToken } }), {
    logger: false,
    abortOnError: false,
  });
  await app.listen(0, '127.0.0.1');
  const origin = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { app, origin, base: `${origin}/workhorse/` };
}

/**
 * A page in a new browser context (1280 by 800) signed in as the sample's operator through its
 * `GET /operator?token=...`, which lands on the dashboard. Every dialog's message is pushed to
 * `dialogs` and the dialog answered as `answer` says.
 */
export async function operatorPage(
  browser: Browser,
  dashboard: SampleDashboard,
  operatorToken: string,
  dialogs: string[],
  answer: 'accept' | 'dismiss',
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void (answer === 'accept' ? dialog.accept() : dialog.dismiss());
  });
  await page.goto(`${dashboard.origin}/operator?token=${operatorToken}`);
  if (page.url() !== dashboard.base) throw new Error(`signing in landed on ${page.url()}, not on ${dashboard.base}`);
  return { context, page };
}
