/**
 * Running `workhorse` in-process for tests, and the SQL shortcuts that put jobs into the states
 * a command needs (claimed, succeeded, failed) without a worker.
 */
import { runCli } from '../../lib/cli';
import type { TestDatabase } from '../support/db';

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

export interface ClaimRow {
  job_id: string;
  fence_token: string;
}

export const WORKER = 'cli-test-worker';

export async function claimOne(db: TestDatabase, queue: string): Promise<ClaimRow> {
  const { rows } = await db.pool.query<ClaimRow>(
    'SELECT job_id, fence_token FROM workhorse.claim_many_v1($1, $2, 1, 60000)',
    [[queue], WORKER],
  );
  expect(rows).toHaveLength(1);
  return rows[0];
}

export async function complete(db: TestDatabase, job: ClaimRow, result: unknown): Promise<void> {
  const { rows } = await db.pool.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status', [
    job.job_id,
    WORKER,
    job.fence_token,
    JSON.stringify(result),
  ]);
  expect(rows[0].status).toBe('succeeded');
}

export async function fail(db: TestDatabase, job: ClaimRow, error: object, options: object): Promise<void> {
  await db.pool.query('SELECT status FROM workhorse.fail_v1($1, $2, $3, $4::jsonb, $5::jsonb)', [
    job.job_id,
    WORKER,
    job.fence_token,
    JSON.stringify(error),
    JSON.stringify(options),
  ]);
}

/** Connections the CLI left on `db` (it names itself `workhorse-cli`); waits for backends to exit. */
export async function cliConnections(db: TestDatabase): Promise<number> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const { rows } = await db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'workhorse-cli'",
      [db.name],
    );
    if (rows[0].n === 0 || Date.now() > deadline) return rows[0].n;
    await new Promise((done) => setTimeout(done, 25));
  }
}
