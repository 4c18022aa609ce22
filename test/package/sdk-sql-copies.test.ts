/**
 * The Python and Go SDKs ship the SQL inside their packages (wheel package data, Go `embed`):
 * exact copies of this repository's sql/ tree, top-level files and migrations/, made by
 * `node scripts/copy-sdk-sql.js`. A change to sql/ without re-running the copy fails here.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { itIf } from '../support/requirements';

const ROOT = resolve(__dirname, '..', '..');
const SOURCE = join(ROOT, 'sql');
const COPIES = [join(ROOT, 'sdk', 'python', 'src', 'workhorse', 'sql'), join(ROOT, 'sdk', 'go', 'sql')];

/** Every .sql file under `dir`, relative to it, with its text. */
function sqlTree(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (at: string) => {
    for (const name of readdirSync(at).sort()) {
      const path = join(at, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.sql')) files[relative(dir, path)] = readFileSync(path, 'utf8');
    }
  };
  walk(dir);
  return files;
}

describe('the SDKs ship exact copies of sql/', () => {
  for (const copy of COPIES) {
    const name = relative(ROOT, copy);
    itIf(
      { met: existsSync(copy), missing: `${name} does not exist yet (node scripts/copy-sdk-sql.js makes it)` },
      `${name} holds exactly the files of sql/ and sql/migrations/, byte for byte`,
      () => {
        const source = sqlTree(SOURCE);
        expect(Object.keys(source)).toEqual(expect.arrayContaining(['010_tables.sql', join('migrations', '0005_migration_log.sql')]));
        expect(sqlTree(copy)).toEqual(source);
      },
    );
  }
});
