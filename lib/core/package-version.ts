/**
 * The version of the installed nestjs-workhorse, for `workhorse --version` and the registry of live workers: read from the
 * package's own package.json, found by walking up from this file (it sits at a different depth
 * in the sources, `lib/core/`, than in the build, `dist/lib/core/`).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const PACKAGE_NAME = 'nestjs-workhorse';

export function packageVersion(from: string = __dirname): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const manifest = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
      if (manifest.name === PACKAGE_NAME && typeof manifest.version === 'string') return manifest.version;
    }
    if (dirname(dir) === dir) throw new Error(`cannot find the package.json of ${PACKAGE_NAME} above ${from}`);
  }
}

let cached: string | undefined;

/**
 * {@link packageVersion} for what only reports it (the registry of live workers, the meter's
 * version): `unknown` where no package.json is found (a bundled application), read once.
 */
export function reportedVersion(): string {
  if (cached === undefined) {
    try {
      cached = packageVersion();
    } catch {
      cached = 'unknown';
    }
  }
  return cached;
}
