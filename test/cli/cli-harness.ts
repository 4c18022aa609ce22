/**
 * Running `workhorse` in-process for tests, and what its output is checked against. Jobs are put
 * into the states a command needs (claimed, succeeded, failed) with test/support/protocol.
 */
import { runCli } from '../../lib/cli';
import { Admin, Queue } from '../../lib/core';
import type { TestDatabase } from '../support/db';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export type Env = Record<string, string | undefined>;

function sink(): { write(text: string): boolean; text: string } {
  return {
    text: '',
    write(text: string) {
      this.text += text;
      return true;
    },
  };
}

export async function cli(args: string[], env: Env): Promise<CliRun> {
  const stdout = sink();
  const stderr = sink();
  const code = await runCli(args, { stdout, stderr, env });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** The one JSON document a successful `--json` run printed. */
export function documentOf<T>(run: CliRun, code = 0): T {
  expect(run.stderr).toBe('');
  expect(run.code).toBe(code);
  return JSON.parse(run.stdout) as T;
}

/** A failed run: the exit code, nothing on stdout, exactly one line on stderr; returns it. */
export function errorOf(run: CliRun, code: number): string {
  expect(run).toMatchObject({ code, stdout: '' });
  expect(run.stderr).toMatch(/^workhorse: [^\n]+\n$/);
  return run.stderr.trimEnd();
}

/** What a value looks like after a trip through JSON: Dates become ISO strings. */
export function viaJson<T>(value: T): unknown {
  return JSON.parse(JSON.stringify(value));
}

/** The worker id the tests claim jobs with (through test/support/protocol), as the CLI shows it. */
export const WORKER = 'cli-test-worker';

/** Connections the CLI left on `db` (it names itself `workhorse-cli`); waits for backends to exit. */
export async function cliConnections(db: TestDatabase): Promise<number> {
  const count = async (): Promise<number> => {
    const { rows } = await db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'workhorse-cli'",
      [db.name],
    );
    return rows[0].n;
  };
  try {
    await waitFor(async () => (await count()) === 0, 5000, 'the CLI connections to close');
    return 0;
  } catch {
    return count();
  }
}

/** A database for the CLI tests of one file or describe block, with what they enqueue and read through. */
export interface CliTestBed {
  db: TestDatabase;
  env: Env;
  queue: Queue;
  admin: Admin;
}

/**
 * Registers the hooks of a CLI test bed: a database test bed (test/support/test-database: a fresh
 * database, the split invariant after each test, the drop) whose tear-down first checks that the
 * CLI left no connection.
 */
export function useCliDatabase(): CliTestBed {
  const { db, queue, admin } = useTestDatabase({
    beforeDrop: async (created) => {
      if (created) expect(await cliConnections(db)).toBe(0);
    },
  });
  return { db, env: { DATABASE_URL: db.url }, queue, admin };
}
