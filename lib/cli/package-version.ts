/**
 * The version of the installed nestjs-workhorse, for `workhorse --version`: read from the
 * package's own package.json, found by walking up from this file (it sits at a different depth
 * in the sources, `lib/cli/`, than in the build, `dist/lib/cli/`).
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
