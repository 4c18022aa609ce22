/**
 * The Go SDK offers every public call of the TypeScript `Queue` and `Admin` (issue 32): each
 * public method of lib/core/queue.ts (`Queue`) and lib/core/admin.ts / admin-calls.ts (`Admin`
 * and its base `AdminCalls`) has a method of the same name on Go's `*Queue` or `*Admin`
 * (`getJob` is `GetJob`), but for the renames and the declared exceptions below, each with its
 * reason. Read from the sources; an exception that no longer applies fails too.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

/** TypeScript names whose Go method is named otherwise. */
const RENAMED: Record<string, string> = {
  getScheduleHistory: 'ScheduleHistory',
};

/** TypeScript calls Go does not offer, and why. */
const NOT_IN_GO: Record<string, string> = {
  findJobs: 'a read of the dashboard (served by the TypeScript package)',
  jobDurations: 'a read of the dashboard (served by the TypeScript package)',
  jobTimings: 'a read of the dashboard (served by the TypeScript package)',
  errorGroups: 'a read of the dashboard (served by the TypeScript package)',
};

/** The public methods of the classes of a TypeScript file (two-space indented members, no modifier). */
function tsMethods(file: string): string[] {
  const source = readFileSync(join(ROOT, file), 'utf8');
  const bodies = [...source.matchAll(/^export (?:abstract )?class \w+[^\n]*\{\n([\s\S]*?)^\}/gm)].map((m) => m[1]);
  const names = bodies.flatMap((text) => [...text.matchAll(/^ {2}(?:async )?([a-z][A-Za-z0-9]*)\s*(?:<.*?>)?\(/gm)].map((m) => m[1]));
  return [...new Set(names)].filter((name) => name !== 'constructor');
}

/** The exported methods of Go's `*Queue` or `*Admin`. */
function goMethods(type: 'Queue' | 'Admin'): Set<string> {
  const dir = join(ROOT, 'sdk/go');
  const found = new Set<string>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.go') && !f.endsWith('_test.go'))) {
    const text = readFileSync(join(dir, file), 'utf8');
    for (const m of text.matchAll(new RegExp(`^func \\(\\w+ \\*${type}\\) ([A-Z]\\w*)\\(`, 'gm'))) found.add(m[1]);
  }
  return found;
}

const goName = (ts: string): string => RENAMED[ts] ?? ts[0].toUpperCase() + ts.slice(1);

describe('the Go SDK offers the TypeScript Queue and Admin', () => {
  const queue = tsMethods('lib/core/queue.ts');
  const admin = [...tsMethods('lib/core/admin.ts'), ...tsMethods('lib/core/admin-calls.ts')];

  it('reads the TypeScript classes', () => {
    expect(queue).toEqual(expect.arrayContaining(['enqueue', 'enqueueMany', 'getJob', 'sendSignal']));
    expect(admin).toEqual(expect.arrayContaining(['getJob', 'listJobs', 'health', 'triggerSchedule']));
  });

  it('every public method has a Go counterpart, but for the declared exceptions', () => {
    const missing = [
      ...queue.filter((m) => !NOT_IN_GO[m] && !goMethods('Queue').has(goName(m))).map((m) => `Queue.${m} (Go ${goName(m)})`),
      ...admin.filter((m) => !NOT_IN_GO[m] && !goMethods('Admin').has(goName(m))).map((m) => `Admin.${m} (Go ${goName(m)})`),
    ];
    expect(missing).toEqual([]);
  });

  it('the exceptions still apply', () => {
    const all = new Set([...queue, ...admin]);
    const stale = Object.keys(NOT_IN_GO).filter((m) => !all.has(m) || goMethods('Queue').has(goName(m)) || goMethods('Admin').has(goName(m)));
    expect(stale).toEqual([]);
    expect(Object.keys(RENAMED).filter((m) => !all.has(m))).toEqual([]);
  });
});
