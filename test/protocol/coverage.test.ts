/**
 * Protocol coverage: every `workhorse.*_vN` function granted to a capability
 * (sql/990_privileges.sql), and which SDK calls it, found by reading the SDKs' sources (comments
 * left out). The table is docs/protocol-coverage.md (regenerate it with
 * `UPDATE_PROTOCOL_COVERAGE=1 npx jest test/protocol/coverage.test.ts`).
 *
 * Fails when an SDK calls a retired or deprecated version (the list below and the deprecation
 * table of docs/protocol.md), or when a function the TypeScript package calls has no caller in
 * Python or Go, unless the gap is in KNOWN_GAPS.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(__dirname, '..', '..');
type Sdk = 'TypeScript' | 'Python' | 'Go';
const SDKS: Sdk[] = ['TypeScript', 'Python', 'Go'];

/** Versions no SDK may call: retired by the issue that replaced them, whatever protocol.md says. */
const RETIRED = ['list_jobs_v1', 'claim_many_v1', 'complete_many_v1'];

/**
 * Functions the TypeScript package calls that an SDK does not call yet: the gaps issue 32 fills.
 * Each entry says why; remove it when the SDK calls the function (the test fails on an entry
 * that is no gap any more, so the list stays honest).
 */
const KNOWN_GAPS: Record<string, { sdks: Sdk[]; why: string }> = {
  error_groups_v1: { sdks: ['Go'], why: 'a read of the dashboard (served by the TypeScript package)' },
  find_jobs_v1: { sdks: ['Go'], why: 'a read of the dashboard (served by the TypeScript package)' },
  job_durations_v1: { sdks: ['Go'], why: 'a read of the dashboard (served by the TypeScript package)' },
  job_timings_v1: { sdks: ['Go'], why: 'a read of the dashboard (served by the TypeScript package)' },
  list_queues_v3: { sdks: ['Python', 'Go'], why: 'their QueueInfo shows no flow-control limits yet (list_queues_v2 serves it; set_queue_policy answers the policy in force)' },
};

/**
 * Deprecated versions an SDK may still call, each only where it reads a schema older than its
 * own on purpose: `workhorse schema status` lists the live workers before a migration, on the
 * schema that is installed (it asks the catalog whether the successor exists first).
 */
const OLDER_SCHEMA_READS: Record<string, { files: string[]; why: string }> = {
  list_workers_v1: {
    files: ['lib/core/protocol/admin.ts', 'sdk/python/src/workhorse/_protocol.py'],
    why: 'schema status reads the live workers of a schema that has no list_workers_v2 yet',
  },
};

function files(dir: string, keep: (path: string) => boolean): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!['sql', 'node_modules', '.venv', 'examples', 'internal', '__pycache__'].includes(entry.name)) out.push(...files(path, keep));
    } else if (keep(path)) {
      out.push(path);
    }
  }
  return out;
}

// Comments are left out (a function named in a comment is not called): `//` and `/* */` in
// TypeScript and Go, `#` and docstrings in Python. Good enough for these sources, whose SQL
// text never holds those markers.
function code(path: string): string {
  const text = readFileSync(path, 'utf8');
  if (path.endsWith('.py')) return text.replace(/"""[\s\S]*?"""/g, '').replace(/#.*$/gm, '');
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
}

const SOURCES: Record<Sdk, string[]> = {
  TypeScript: files(join(ROOT, 'lib'), (p) => p.endsWith('.ts') && !p.endsWith('.d.ts')),
  Python: files(join(ROOT, 'sdk/python/src/workhorse'), (p) => p.endsWith('.py')),
  Go: files(join(ROOT, 'sdk/go'), (p) => p.endsWith('.go') && !p.endsWith('_test.go')),
};

/** The protocol functions and their capabilities, as sql/990_privileges.sql grants them. */
function protocolFunctions(): Map<string, string[]> {
  const sql = readFileSync(join(ROOT, 'sql/990_privileges.sql'), 'utf8');
  const list = sql.slice(sql.indexOf('INSERT INTO workhorse.protocol_function'));
  const found = new Map<string, string[]>();
  for (const m of list.slice(0, list.indexOf(';')).matchAll(/\('(\w+_v\d+)',\s*'\{([^}]*)\}'\)/g)) found.set(m[1], m[2].split(','));
  return found;
}

/**
 * The `_vN` functions docs/protocol.md lists as deprecated (first column of its table; a row about
 * a function's field, "`tick_v1`'s `schedulesToPlan`", deprecates the field only).
 */
function deprecated(): string[] {
  const doc = readFileSync(join(ROOT, 'docs/protocol.md'), 'utf8');
  const table = doc.slice(doc.indexOf('| deprecated | successor | kept as |'));
  const rows = table.slice(0, table.search(/\n\n/)).split('\n').slice(2);
  return [...new Set(rows.flatMap((row) => [...(row.split('|')[1] ?? '').matchAll(/`(\w+_v\d+)(?:\([^`]*)?`(?!'s)/g)].map((m) => m[1])))];
}

function callers(names: string[]): Map<string, Record<Sdk, string[]>> {
  const calls = new Map<string, Record<Sdk, string[]>>();
  for (const name of names) calls.set(name, { TypeScript: [], Python: [], Go: [] });
  for (const sdk of SDKS) {
    for (const path of SOURCES[sdk]) {
      const text = code(path);
      for (const name of names) if (new RegExp(`\\b${name}\\b`).test(text)) calls.get(name)![sdk].push(relative(ROOT, path));
    }
  }
  return calls;
}

function table(functions: Map<string, string[]>, calls: Map<string, Record<Sdk, string[]>>, old: Set<string>): string {
  const lines = [
    '# Protocol coverage',
    '',
    'Generated by `test/protocol/coverage.test.ts` (do not edit; regenerate with',
    '`UPDATE_PROTOCOL_COVERAGE=1 npx jest test/protocol/coverage.test.ts`): each `workhorse.*_vN`',
    'function granted to a capability (`sql/990_privileges.sql`) and the SDKs whose sources call it.',
    '"deprecated" marks a version kept only for the previous release (docs/protocol.md); no SDK may',
    'call one. A function TypeScript calls and another SDK does not is a known gap (issue 32), listed',
    'with its reason in the test.',
    '',
    '| function | capabilities | TypeScript | Python | Go |',
    '|---|---|---|---|---|',
  ];
  for (const [name, caps] of [...functions].sort(([a], [b]) => a.localeCompare(b))) {
    const c = calls.get(name)!;
    const cell = (sdk: Sdk): string => (c[sdk].length > 0 ? 'yes' : KNOWN_GAPS[name]?.sdks.includes(sdk) ? 'gap' : '');
    lines.push(`| \`${name}\`${old.has(name) ? ' (deprecated)' : ''} | ${caps.join(', ')} | ${cell('TypeScript')} | ${cell('Python')} | ${cell('Go')} |`);
  }
  return `${lines.join('\n')}\n`;
}

describe('protocol coverage', () => {
  const functions = protocolFunctions();
  const names = [...functions.keys()];
  const calls = callers(names);
  const old = new Set([...RETIRED, ...deprecated()]);

  it('reads the protocol functions and the deprecation list', () => {
    expect(names.length).toBeGreaterThan(50);
    expect(names).toEqual(expect.arrayContaining(['fail_v1', 'list_jobs_v3', 'complete_and_claim_v1']));
    expect([...old]).toEqual(expect.arrayContaining(['list_jobs_v1', 'get_timeline_v1', 'report_worker_v1']));
    for (const sdk of SDKS) expect(SOURCES[sdk].length).toBeGreaterThan(5);
  });

  it('no SDK calls a retired or deprecated version', () => {
    const offenders = [...old].flatMap((name) =>
      SDKS.flatMap((sdk) => (calls.get(name)?.[sdk] ?? []).filter((file) => !OLDER_SCHEMA_READS[name]?.files.includes(file)).map((file) => `${name} in ${file}`)),
    );
    expect(offenders).toEqual([]);
    // An exception that no longer applies goes.
    const stale = Object.entries(OLDER_SCHEMA_READS).flatMap(([name, { files: allowed }]) =>
      allowed.filter((file) => !SDKS.some((sdk) => (calls.get(name)?.[sdk] ?? []).includes(file))).map((file) => `${name} in ${file}`),
    );
    expect(stale).toEqual([]);
  });

  it('every function TypeScript calls is called by Python and Go too, but for the known gaps', () => {
    const gaps: string[] = [];
    for (const [name, c] of calls) {
      if (c.TypeScript.length === 0 || old.has(name)) continue;
      for (const sdk of ['Python', 'Go'] as const) {
        if (c[sdk].length === 0 && !KNOWN_GAPS[name]?.sdks.includes(sdk)) gaps.push(`${name}: not called by ${sdk}`);
      }
    }
    expect(gaps).toEqual([]);
  });

  it('the known gaps are still gaps (an entry whose SDK now calls the function goes)', () => {
    const closed = Object.entries(KNOWN_GAPS).flatMap(([name, gap]) =>
      gap.sdks.filter((sdk) => !functions.has(name) || calls.get(name)![sdk].length > 0 || calls.get(name)!.TypeScript.length === 0).map((sdk) => `${name} (${sdk})`),
    );
    expect(closed).toEqual([]);
  });

  it('docs/protocol-coverage.md is the current table', () => {
    const generated = table(functions, calls, old);
    const path = join(ROOT, 'docs/protocol-coverage.md');
    if (process.env.UPDATE_PROTOCOL_COVERAGE) writeFileSync(path, generated);
    expect(readFileSync(path, 'utf8')).toBe(generated);
  });
});
