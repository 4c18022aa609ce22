/**
 * The baseline release (schema version 4, commit a46ad78) read from git history: its `sql/` to
 * install a database as that release did, and its whole `lib/` to run that release's own client
 * in a child process. A checkout without the commit (a shallow clone) fails with what to do.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Pool } from 'pg';

export const BASELINE_COMMIT = 'a46ad78';
export const BASELINE_VERSION = 4;
const ROOT = resolve(__dirname, '..', '..');

function git(args: string[]): string {
  return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Fails clearly unless the baseline commit is in this checkout's history. */
export function requireBaselineCommit(): void {
  try {
    git(['cat-file', '-e', `${BASELINE_COMMIT}^{commit}`]);
  } catch {
    throw new Error(
      `The upgrade tests need commit ${BASELINE_COMMIT} (the baseline release, schema version 4) in this checkout's git ` +
        'history, and it is missing: a shallow clone? Run `git fetch --unshallow` (or clone without --depth) and run the tests again.',
    );
  }
}

let sqlFiles: { name: string; sql: string }[] | undefined;

/** The baseline's top-level sql/*.sql files, in the order its installer ran them. */
export function baselineSql(): { name: string; sql: string }[] {
  if (sqlFiles) return sqlFiles;
  requireBaselineCommit();
  const names = git(['ls-tree', '--name-only', `${BASELINE_COMMIT}`, 'sql/'])
    .split('\n')
    .filter((path) => /^sql\/[^/]+\.sql$/.test(path))
    .sort();
  sqlFiles = names.map((path) => ({ name: path.slice('sql/'.length), sql: git(['show', `${BASELINE_COMMIT}:${path}`]) }));
  return sqlFiles;
}

/** Installs the baseline schema exactly as the baseline's installSchema did: its files, then version 4, in one transaction. */
export async function installBaseline(pool: Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    for (const file of baselineSql()) await client.query(file.sql);
    await client.query('INSERT INTO workhorse.schema_version (version) VALUES ($1)', [BASELINE_VERSION]);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** A directory holding the baseline's lib/ and sql/ (from `git archive`), with this checkout's node_modules linked in. */
export interface BaselineCheckout {
  dir: string;
  remove(): void;
}

/** Extracts the baseline's lib/, sql/ and package.json into a temporary directory. */
export function extractBaseline(): BaselineCheckout {
  requireBaselineCommit();
  const dir = mkdtempSync(join(tmpdir(), 'workhorse-baseline-'));
  execFileSync('sh', ['-c', `git archive ${BASELINE_COMMIT} lib sql package.json tsconfig.json | tar -x -C "${dir}"`], { cwd: ROOT, stdio: 'pipe' });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
