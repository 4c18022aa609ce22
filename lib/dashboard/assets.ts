import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** One static file the dashboard serves, under a name that changes whenever its content does. */
export interface DashboardAsset {
  /** `dashboard.3f9a1c2e.css`: the URL path below `assets/`. */
  name: string;
  contentType: string;
  body: Buffer;
}

/**
 * Where the stylesheet and the script live: `lib/dashboard/assets/` in the repository, and
 * `dist/lib/dashboard/assets/` in the package, where the build copies them.
 */
export const ASSETS_DIR = join(__dirname, 'assets');

const FILES = [
  { file: 'dashboard.css', contentType: 'text/css; charset=utf-8' },
  { file: 'dashboard.js', contentType: 'text/javascript; charset=utf-8' },
] as const;

export type AssetFile = (typeof FILES)[number]['file'];

/**
 * Reads the dashboard's assets once. Each is served under a name with a hash of its content,
 * so browsers may cache it for good and still get the new one after an upgrade.
 */
export function loadAssets(dir: string = ASSETS_DIR): ReadonlyMap<AssetFile, DashboardAsset> {
  const assets = new Map<AssetFile, DashboardAsset>();
  for (const { file, contentType } of FILES) {
    const body = readFileSync(join(dir, file));
    const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
    const dot = file.lastIndexOf('.');
    assets.set(file, { name: `${file.slice(0, dot)}.${hash}${file.slice(dot)}`, contentType, body });
  }
  return assets;
}
