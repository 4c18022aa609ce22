/**
 * Headless Chromium for the dashboard's browser tests: Debian's `chromium` package driven by
 * `playwright-core` (pinned to the release whose protocol matches Debian's Chromium 156), which
 * downloads no browser of its own. `.ci/run` installs the package; elsewhere, without it, the
 * browser tests are skipped and say why, except under CI=true, where they fail.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import type { Requirement } from './requirements';

/** Where the browser is: WORKHORSE_CHROMIUM, or Debian's. */
export const CHROMIUM_PATH = process.env.WORKHORSE_CHROMIUM ?? '/usr/bin/chromium';

/** Chromium for {@link describeIf}: a machine without it skips the browser tests saying why, except under CI=true, where they fail. */
export const CHROMIUM: Requirement = {
  met: existsSync(CHROMIUM_PATH),
  missing: `no Chromium at ${CHROMIUM_PATH} (apt-get install chromium, or set WORKHORSE_CHROMIUM)`,
  requiredInCi: true,
};

/** One headless browser for a whole test file (contexts are cheap, browsers are not). */
export function launchChromium(): Promise<Browser> {
  // Root gets --no-sandbox from playwright-core itself; the flags below only save CPU.
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: ['--disable-gpu', '--disable-extensions', '--mute-audio'] });
}
