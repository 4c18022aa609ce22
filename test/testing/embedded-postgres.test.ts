/**
 * `startEmbeddedPostgres` of `nestjs-workhorse/testing`. The servers are started in a plain Node
 * process (test/fixtures/embedded-postgres-scenarios.ts), as users start them from Jest's global
 * setup: the documented global setup and teardown of docs/testing.md, run as written; a kept
 * data directory; a directory that is not a cluster; a taken port. In this file's own process
 * (Jest's sandbox): option checks, and the typed errors for a package that is missing or that
 * cannot be loaded here.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { WorkhorseValidationError } from '../../lib/core';
import { EmbeddedPostgresUnavailableError, startEmbeddedPostgres, type EmbeddedPostgresOptions } from '../../lib/testing';
import { loadEmbeddedPostgres } from '../../lib/testing/embedded-postgres-package';

const ROOT = resolve(__dirname, '..', '..');
const SCENARIOS = join(ROOT, 'test', 'fixtures', 'embedded-postgres-scenarios.ts');

interface ErrorSeen {
  name: string;
  message: string;
  log?: string[];
}

interface Report {
  documentedGlobalSetup: { url: string; row: { version: string; fsync: string }; dataDirDuring: string; dataDirAfter: boolean; afterStop: string };
  keptDataDir: { first: { initialised: boolean; fsync: string }; second: { initialised: boolean; rows: { n: number }[] }; kept: boolean };
  foreignDataDir: { error: ErrorSeen | null; untouched: string };
  takenPort: { error: ErrorSeen | null };
}

describe('in a plain Node process, as from Jest global setup', () => {
  let workDir: string;
  let report: Report;

  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'workhorse-embedded-test-'));
    // As root, PostgreSQL runs as the OS user postgres, which must be able to enter it.
    chmodSync(workDir, 0o755);
    const { stdout } = await promisify(execFile)(process.execPath, [join(ROOT, 'scripts', 'run-ts.js'), SCENARIOS, workDir], {
      cwd: ROOT,
      timeout: 240_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    report = JSON.parse(stdout) as Report;
  }, 250_000);

  afterAll(() => {
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it("docs/testing.md's global setup starts a server the tests reach, and its teardown stops it and removes its data", () => {
    const seen = report.documentedGlobalSetup;
    expect(seen.url).toMatch(/^postgres:\/\/postgres:[0-9a-f]{24}@127\.0\.0\.1:\d+\/postgres$/);
    // PostgreSQL 18 from embedded-postgres, with durability off for throw-away data.
    expect(seen.row).toEqual({ version: expect.stringMatching(/^18\./), fsync: 'off' });
    expect(seen.dataDirDuring.startsWith(join(tmpdir(), 'workhorse-pg-'))).toBe(true);
    expect(seen.dataDirAfter).toBe(false);
    expect(seen.afterStop).toBe('ECONNREFUSED');
  });

  it('a kept data directory is initialised once and its data is there at the next start, durably', () => {
    expect(report.keptDataDir).toEqual({
      first: { initialised: true, fsync: 'on' },
      second: { initialised: false, rows: [{ n: 42 }] },
      kept: true,
    });
  });

  it('a data directory that holds other files is refused and left as it was', () => {
    expect(report.foreignDataDir.error).toMatchObject({ name: 'EmbeddedPostgresError', message: expect.stringContaining('holds files but no PostgreSQL cluster') });
    expect(report.foreignDataDir.untouched).toBe('mine');
  });

  it('a taken port the caller named fails once (no retries on it), with the server log saying why', () => {
    const error = report.takenPort.error;
    expect(error).toMatchObject({ name: 'EmbeddedPostgresError', message: expect.stringContaining('--- last lines of the embedded PostgreSQL log ---') });
    expect(error?.log?.some((line) => line.includes('could not bind'))).toBe(true);
    expect(error?.log?.filter((line) => line.includes('starting PostgreSQL'))).toHaveLength(1);
  });
});

describe("in Jest's test sandbox", () => {
  it.each<[EmbeddedPostgresOptions, string]>([
    [{ port: 0 }, 'port'],
    [{ port: 70_000 }, 'port'],
    [{ prot: 5432 } as EmbeddedPostgresOptions, 'prot'],
    [{ dataDir: '/tmp/somewhere' }, 'password'],
    [{ dataDir: '', password: 'x' }, 'dataDir'],
    [{ settings: ['fsync'] }, 'settings[0]'],
    [{ authMethod: 'trust' as 'password' }, 'authMethod'],
    [{ startTimeoutMs: -1 }, 'startTimeoutMs'],
  ])('refuses %j before starting anything, naming %s', async (options, field) => {
    const error = await startEmbeddedPostgres(options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    expect((error as WorkhorseValidationError).field).toBe(field);
  });

  it('cannot load the ES module, and says to start the server in global setup', async () => {
    const error = await startEmbeddedPostgres().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EmbeddedPostgresUnavailableError);
    expect(error).toMatchObject({ reason: 'cannot-load', message: expect.stringContaining("Jest's globalSetup") });
  });

  it('a missing package says what to install', async () => {
    const error = await loadEmbeddedPostgres('embedded-postgres-not-installed').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EmbeddedPostgresUnavailableError);
    expect(error).toMatchObject({
      reason: 'not-installed',
      message: 'startEmbeddedPostgres needs the optional peer dependency embedded-postgres-not-installed: npm install --save-dev embedded-postgres-not-installed',
    });
  });
});
