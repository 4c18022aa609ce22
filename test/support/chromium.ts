/**
 * Headless Chromium for the dashboard's browser tests: Debian's `chromium` package driven by
 * `playwright-core` (pinned to the release whose protocol matches Debian's Chromium 156), which
 * downloads no browser of its own. `.ci/run` installs the package; elsewhere, without it, the
 * browser tests are skipped and say why, except under CI=true, where they fail.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Where the browser is: WORKHORSE_CHROMIUM, or Debian's. */
export const CHROMIUM_PATH = process.env.WORKHORSE_CHROMIUM ?? '/usr/bin/chromium';

/** Null when Chromium can be launched; otherwise why not, and how to get it. */
export function chromiumMissing(): string | null {
  if (existsSync(CHROMIUM_PATH)) return null;
  const why = `no Chromium at ${CHROMIUM_PATH} (apt-get install chromium, or set WORKHORSE_CHROMIUM)`;
  if (process.env.CI === 'true') throw new Error(`The browser tests must run in CI: ${why}`);
  return why;
}

/** One headless browser for a whole test file (contexts are cheap, browsers are not). */
export function launchChromium(): Promise<Browser> {
  // Root gets --no-sandbox from playwright-core itself; the flags below only save CPU.
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: ['--disable-gpu', '--disable-extensions', '--mute-audio'] });
}
