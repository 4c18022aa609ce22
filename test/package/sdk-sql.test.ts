/**
 * The Python and Go SDKs ship the SQL inside their packages (issue 29, item 2): the wheel's
 * workhorse/sql/ and the Go module's embedded sql/ are copies of the repository's sql/ tree made
 * by `node scripts/copy-sdk-sql.js`. A change to sql/ without re-running the copy fails here.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const COPIES = { python: join('sdk', 'python', 'src', 'workhorse', 'sql'), go: join('sdk', 'go', 'sql') };

/** Every file under dir, relative to it with / separators, sorted. */
function tree(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? tree(join(dir, entry.name), `${prefix}${entry.name}/`) : [`${prefix}${entry.name}`]))
    .sort();
}

function contents(dir: string): Record<string, string> {
  return Object.fromEntries(tree(dir).map((file) => [file, readFileSync(join(dir, file), 'utf8')]));
}

describe('the SQL the SDKs ship', () => {
  const source = contents(join(ROOT, 'sql'));

  it('has the full schema and the migration steps', () => {
    expect(Object.keys(source)).toContain('010_tables.sql');
    expect(Object.keys(source).some((file) => /^migrations\/\d{4}_[a-z0-9_]+\.sql$/.test(file))).toBe(true);
  });

  it.each(Object.entries(COPIES))('is in the %s SDK byte for byte as in sql/ (run `node scripts/copy-sdk-sql.js` after changing sql/)', (_sdk, copy) => {
    expect(contents(join(ROOT, copy))).toEqual(source);
  });

  it('is copied by scripts/copy-sdk-sql.js, which removes files that are no longer in sql/', () => {
    const scratch = mkdtempSync(join(tmpdir(), 'workhorse-sdk-sql-'));
    try {
      mkdirSync(join(scratch, 'scripts'));
      copyFileSync(join(ROOT, 'scripts', 'copy-sdk-sql.js'), join(scratch, 'scripts', 'copy-sdk-sql.js'));
      mkdirSync(join(scratch, 'sql', 'migrations'), { recursive: true });
      writeFileSync(join(scratch, 'sql', '010_a.sql'), 'SELECT 1;\n');
      writeFileSync(join(scratch, 'sql', 'migrations', '0002_b.sql'), 'SELECT 2;\n');
      mkdirSync(join(scratch, 'sdk', 'protocol'), { recursive: true });
      writeFileSync(join(scratch, 'sdk', 'protocol', 'limits.json'), '{}\n');
      for (const copy of Object.values(COPIES)) {
        mkdirSync(join(scratch, copy, 'migrations'), { recursive: true });
        writeFileSync(join(scratch, copy, 'migrations', '0001_renamed.sql'), 'stale\n');
        writeFileSync(join(scratch, copy, '005_removed.sql'), 'stale\n');
      }
      execFileSync(process.execPath, [join(scratch, 'scripts', 'copy-sdk-sql.js')], { stdio: 'pipe' });
      for (const copy of Object.values(COPIES)) {
        expect(contents(join(scratch, copy))).toEqual({ '010_a.sql': 'SELECT 1;\n', 'migrations/0002_b.sql': 'SELECT 2;\n' });
      }
      expect(existsSync(join(scratch, 'sdk', 'go', 'sql', '005_removed.sql'))).toBe(false);
      expect(readFileSync(join(scratch, 'sdk', 'go', 'limits.json'), 'utf8')).toBe('{}\n');
      expect(readFileSync(join(scratch, 'sdk', 'python', 'src', 'workhorse', 'limits.json'), 'utf8')).toBe('{}\n');
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
