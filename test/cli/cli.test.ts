/**
 * The `workhorse` command line against real databases: exit codes, `--json` documents checked
 * against the Admin API, the key facts of the text output, one-line errors, help for every
 * command, and the `bin/workhorse.js` shim run as a real process from a source checkout.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { getSchemaStatus, grantRole, MIN_SCHEMA_VERSION, SCHEMA_VERSION, type JobSnapshot, type Page, type TimelineEntry } from '../../lib/core';
import { readMigrationSteps } from '../../lib/core/migration-steps';
import { MIGRATIONS_DIR } from '../../lib/core/schema';
import { BASELINE_VERSION, installBaseline } from '../support/baseline';
import { createTestDatabase } from '../support/db';
import { claimOne, complete, fail } from '../support/protocol';
import { cli, cliConnections, documentOf, errorOf, useCliDatabase, viaJson, type CliRun, type Env, WORKER } from './cli-harness';
import { useTestDatabase } from '../support/test-database';

const ROOT = resolve(__dirname, '..', '..');

/**
 * The rows of a key-value block as an object, after checking that every value starts in the
 * same column.
 */
function fieldsOf(text: string): Record<string, string> {
  const lines = text.trimEnd().split('\n');
  const column = /^\S+(?: \S+)* {2,}/.exec(lines[0])?.[0].length ?? 0;
  const fields: Record<string, string> = {};
  let last = '';
  for (const line of lines) {
    const key = line.slice(0, column).trim();
    expect(line.slice(column, column + 1)).not.toBe(' ');
    if (key) fields[(last = key)] = line.slice(column);
    else fields[last] += `\n${line.slice(column)}`;
  }
  return fields;
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const address = server.address();
  await new Promise((done) => server.close(done));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('help and the command line', () => {
  const helps: [string[], string, RegExp[]][] = [
    [['--help'], 'Usage: workhorse <command> [options]', [/schema install/, /schema status/, /jobs get ID/, /jobs list/, /jobs timeline ID/, /jobs cancel \[ID\]/, /jobs run-now \[ID\]/, /jobs reschedule ID/, /jobs delete \[ID\]/, /jobs dead-letters/, /jobs redrive \[ID\]/, /queues list/, /queues pause Q/, /queues resume Q/, /DATABASE_URL/, /Exit codes:/]],
    [['-h'], 'Usage: workhorse <command> [options]', [/jobs cancel \[ID\]/]],
    [['schema', '--help'], 'Usage: workhorse schema <command> [options]', [/migrate/, /install/, /status/]],
    [['schema', 'install', '--help'], 'Usage: workhorse schema install [options]', [/--json/, /--database-url URL/]],
    [['schema', 'migrate', '--help'], 'Usage: workhorse schema migrate [options]', [/pending step/, /never downgraded/, /--json/]],
    [['schema', 'status', '--help'], 'Usage: workhorse schema status [options]', [/migration steps/, /live workers/, /Exits 0 when the schema\n?\s*is up to date and 3/]],
    [['jobs', '--help'], 'Usage: workhorse jobs <command> [options]', [/get ID/, /list/, /timeline ID/, /cancel \[ID\]/, /run-now \[ID\]/, /reschedule ID/, /delete \[ID\]/, /dead-letters/, /redrive \[ID\]/]],
    [['jobs', 'get', '--help'], 'Usage: workhorse jobs get ID [options]', [/Arguments:\n {2}ID/]],
    [['jobs', 'list', '--help'], 'Usage: workhorse jobs list [options]', [/--queue Q/, /--type T/, /--state S/, /comma list/, /--limit N/, /--cursor C/]],
    [['jobs', 'timeline', '--help'], 'Usage: workhorse jobs timeline ID [options]', [/--limit N/, /default 100/, /--cursor C/]],
    [['jobs', 'cancel', '--help'], 'Usage: workhorse jobs cancel [ID] [options]', [/--reason TEXT/, /--all/, /--dry-run/]],
    // Help wins over everything else on the line, even a mistake.
    [['jobs', 'list', '--queue', 'emails', '--bogus', '-h'], 'Usage: workhorse jobs list [options]', []],
    [['--json', 'jobs', 'get', '--help'], 'Usage: workhorse jobs get ID [options]', []],
  ];

  it.each(helps)('workhorse %j prints its help and exits 0, without a database', async (args, usage, facts) => {
    const run = await cli(args, {});
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout.startsWith(`${usage}\n`)).toBe(true);
    for (const fact of facts) expect(run.stdout).toMatch(fact);
    expect(run.stdout).toMatch(/Common options:\n {2}--database-url URL .*\n {2}--json .*\n {2}-h, --help/);
    expect(run.stdout.split('\n').every((line) => line === line.trimEnd())).toBe(true);
  });

  const mistakes: [string[], string][] = [
    [[], '`workhorse` needs a command: schema, jobs, queues, schedules, workers, health, retention, waits, changes. Run `workhorse --help` for usage.'],
    [['frob'], 'unknown command "frob" for `workhorse` (commands: schema, jobs, queues, schedules, workers, health, retention, waits, changes). Run `workhorse --help` for usage.'],
    [['jobs'], '`workhorse jobs` needs a command: get, list, timeline, cancel, run-now, reschedule, delete, dead-letters, redrive. Run `workhorse jobs --help` for usage.'],
    [['jobs', 'lst'], 'unknown command "lst" for `workhorse jobs` (commands: get, list, timeline, cancel, run-now, reschedule, delete, dead-letters, redrive). Run `workhorse jobs --help` for usage.'],
    [['jobs', 'list', '--bogus'], 'unknown option --bogus for `workhorse jobs list`. Run `workhorse jobs list --help` for usage.'],
    [['jobs', 'list', '-q', 'x'], 'unknown option -q for `workhorse jobs list`. Run `workhorse jobs list --help` for usage.'],
    [['--queue', 'x', 'jobs', 'list'], 'unknown option --queue for `workhorse`. Run `workhorse --help` for usage.'],
    [['jobs', 'list', '--limit'], 'option --limit needs a value: --limit N. Run `workhorse jobs list --help` for usage.'],
    [['jobs', 'list', '--queue', '--json'], 'option --queue needs a value: --queue Q. Run `workhorse jobs list --help` for usage.'],
    [['jobs', 'list', '--json=yes'], 'option --json takes no value. Run `workhorse jobs list --help` for usage.'],
    [['jobs', 'get'], 'missing argument ID. Run `workhorse jobs get --help` for usage.'],
    [['jobs', 'cancel', randomUUID(), 'now'], 'unexpected argument "now". Run `workhorse jobs cancel --help` for usage.'],
    [['schema', 'status', 'extra'], 'unexpected argument "extra". Run `workhorse schema status --help` for usage.'],
  ];

  it.each(mistakes)('workhorse %j exits 2 with one line that says what is wrong and where to look', async (args, message) => {
    expect(errorOf(await cli(args, { DATABASE_URL: 'postgres://unused@127.0.0.1:1/x' }), 2)).toBe(`workhorse: ${message}`);
  });

  it('without DATABASE_URL or --database-url, exits 2 and says how to give one', async () => {
    for (const env of [{}, { DATABASE_URL: '' }]) {
      const line = errorOf(await cli(['schema', 'status'], env), 2);
      expect(line).toMatch(/no database given: set DATABASE_URL or pass --database-url/);
    }
  });

  it('refuses a database URL that is not a PostgreSQL URL with exit 2, without echoing it', async () => {
    const cases: [string[], Env, string][] = [
      [['schema', 'status'], { DATABASE_URL: 'mysql://root:pw@localhost/db' }, 'DATABASE_URL'],
      [['schema', 'status'], { DATABASE_URL: 'postgres://u:pw@localhost:99999/db' }, 'DATABASE_URL'],
      [['jobs', 'list', '--database-url', 'db.internal:5432'], { DATABASE_URL: 'postgres://ignored@127.0.0.1/x' }, '--database-url'],
    ];
    for (const [args, env, source] of cases) {
      expect(errorOf(await cli(args, env), 2)).toBe(
        `workhorse: ${source} is not a PostgreSQL connection URL such as postgres://user:password@host:5432/db. ` +
          `Run \`workhorse ${args.slice(0, 2).join(' ')} --help\` for usage.`,
      );
    }
  });

  it('when nothing listens, exits 1 with one line naming host, port and database, never the password', async () => {
    const port = await closedPort();
    const url = `postgres://ops:s3cret-pw@127.0.0.1:${port}/queue_db`;
    for (const args of [['schema', 'status'], ['jobs', 'get', randomUUID(), '--json'], ['schema', 'install', '--database-url', url]]) {
      const line = errorOf(await cli(args, { DATABASE_URL: url }), 1);
      expect(line).toBe(
        `workhorse: cannot connect to PostgreSQL at 127.0.0.1:${port}/queue_db: connection refused. ` +
          'Is the server running, and is the database URL right?',
      );
    }
  });
});

describe('schema migrate, install and status', () => {
  const { db, roles } = useTestDatabase({ installSchema: false, checkInvariants: false });
  let env: Env;

  beforeAll(async () => {
    env = { DATABASE_URL: db.url };
  });

  it('reports a database without the schema, installs it, then reports it up to date', async () => {
    expect(documentOf(await cli(['schema', 'status', '--json'], env), 3)).toEqual({
      installed: null,
      expected: SCHEMA_VERSION,
      minimum: MIN_SCHEMA_VERSION,
      oldestClient: null,
      upToDate: false,
      compatible: false,
      status: 'not-installed',
      pending: [],
      workers: [],
    });
    expect(await cli(['schema', 'status'], env)).toEqual({
      code: 3,
      stdout: 'No workhorse schema in this database. Run `workhorse schema migrate`.\nLive workers: none.\n',
      stderr: '',
    });
    // Job commands say what is missing instead of quoting "schema does not exist".
    expect(errorOf(await cli(['jobs', 'list'], env), 1)).toBe(
      'workhorse: No workhorse schema in this database. Run `workhorse schema migrate` first.',
    );
    expect(errorOf(await cli(['jobs', 'get', randomUUID()], env), 1)).toMatch(/Run `workhorse schema migrate` first/);

    expect(documentOf(await cli(['schema', 'install', '--json'], env))).toEqual({
      installed: SCHEMA_VERSION,
      expected: SCHEMA_VERSION,
      upToDate: true,
      changed: true,
      created: true,
      from: null,
      to: SCHEMA_VERSION,
      applied: [],
    });
    expect(await getSchemaStatus(db.pool)).toEqual({
      installed: SCHEMA_VERSION,
      expected: SCHEMA_VERSION,
      minimum: MIN_SCHEMA_VERSION,
      oldestClient: 4,
      upToDate: true,
      compatible: true,
    });

    for (const command of ['install', 'migrate']) {
      expect(await cli(['schema', command], env)).toEqual({
        code: 0,
        stdout: `The workhorse schema is already installed (version ${SCHEMA_VERSION}, the version this package ships). Nothing to do.\n`,
        stderr: '',
      });
      expect(documentOf(await cli(['schema', command, '--json'], env))).toMatchObject({ changed: false, upToDate: true, applied: [] });
    }

    expect(await cli(['schema', 'status'], env)).toEqual({
      code: 0,
      stdout: `Installed: version ${SCHEMA_VERSION}. This package: version ${SCHEMA_VERSION}. Up to date.\nLive workers: none.\n`,
      stderr: '',
    });
    // --database-url instead of the environment, and before the command's name.
    expect(documentOf(await cli(['--database-url', db.url, 'schema', 'status', '--json'], {}))).toEqual({
      installed: SCHEMA_VERSION,
      expected: SCHEMA_VERSION,
      minimum: MIN_SCHEMA_VERSION,
      oldestClient: 4,
      upToDate: true,
      compatible: true,
      status: 'up-to-date',
      pending: [],
      workers: [],
    });
    expect(await cliConnections(db)).toBe(0);
  });

  it('lists the steps an older schema lacks and the live workers by version, migrates it, and is up to date after', async () => {
    const old = await createTestDatabase({ installSchema: false });
    try {
      const oldEnv = { DATABASE_URL: old.url };
      await installBaseline(old.pool);
      // Live workers of two releases, and one that is gone (not counted).
      const report = (id: string, version: string, secondsAgo: number) =>
        old.pool.query('SELECT workhorse.report_worker_v1($1, $2, 0)', [
          id,
          { host: 'h', pid: 1, queues: ['default'], concurrency: 1, version, startedAt: new Date().toISOString(), periodMs: 1000 },
        ]).then(() => old.pool.query("UPDATE workhorse.worker_registry SET last_seen_at = now() - $2 * interval '1 second' WHERE worker_id = $1", [id, secondsAgo]));
      await report('a', '0.9.0', 0);
      await report('b', '0.9.0', 0);
      await report('c', '0.10.0', 0);
      await report('d', '0.8.0', 60);

      const pending = readMigrationSteps(MIGRATIONS_DIR).map(({ version, name, transactional }) => ({ version, name, transactional }));
      expect(pending[0]).toEqual({ version: 5, name: 'migration_log', transactional: true });
      expect(documentOf(await cli(['schema', 'status', '--json'], oldEnv), 3)).toEqual({
        installed: BASELINE_VERSION,
        expected: SCHEMA_VERSION,
        minimum: MIN_SCHEMA_VERSION,
        oldestClient: null,
        upToDate: false,
        compatible: BASELINE_VERSION >= MIN_SCHEMA_VERSION,
        status: 'older',
        pending,
        // By version, numerically.
        workers: [
          { version: '0.9.0', count: 2 },
          { version: '0.10.0', count: 1 },
        ],
      });
      const text = await cli(['schema', 'status'], oldEnv);
      expect(text).toMatchObject({ code: 3, stderr: '' });
      expect(text.stdout).toBe(
        `Installed: version ${BASELINE_VERSION}. This package: version ${SCHEMA_VERSION}. Out of date.\n` +
          `The database holds an older workhorse schema: ${pending.length} migration step${pending.length === 1 ? '' : 's'} to apply.\n` +
          pending
            .map((step) => `  ${String(step.version).padStart(4, '0')} ${step.name} (${step.transactional ? 'one transaction' : 'no transaction, resumable'})\n`)
            .join('') +
          "Run `workhorse schema migrate` as the schema's owner; queued jobs, schedules and history are kept.\n" +
          (BASELINE_VERSION >= MIN_SCHEMA_VERSION
            ? `This package's workers and producers also work with version ${BASELINE_VERSION} meanwhile (they accept ${MIN_SCHEMA_VERSION} to ${SCHEMA_VERSION}).\n`
            : `Until then this package's workers refuse to start (they accept versions ${MIN_SCHEMA_VERSION} to ${SCHEMA_VERSION}).\n`) +
          'Live workers: 2 on 0.9.0, 1 on 0.10.0.\n',
      );

      // A role that may not list workers (a producer) still gets the schema's status.
      const producer = await roles.create(old.url, 'wh_cli_producer');
      await grantRole(old.pool, producer.name, 'producer');
      const asProducer = await cli(['schema', 'status', '--json'], { DATABASE_URL: producer.url });
      expect(documentOf(asProducer, 3)).toMatchObject({ installed: BASELINE_VERSION, status: 'older', pending, workers: null });
      expect((await cli(['schema', 'status'], { DATABASE_URL: producer.url })).stdout).toMatch(
        /\nLive workers: not visible to this role \(listing them needs the operator capability\)\.\n$/,
      );
      // Nor may it migrate: the schema's owner does.
      expect(errorOf(await cli(['schema', 'migrate'], { DATABASE_URL: producer.url }), 1)).toMatch(/Run the migration as the schema's owner/);

      expect(await cli(['schema', 'migrate'], oldEnv)).toEqual({
        code: 0,
        stdout:
          `Migrated the workhorse schema from version ${BASELINE_VERSION} to ${SCHEMA_VERSION} ` +
          `(applied step${pending.length === 1 ? '' : 's'} ${pending.map((step) => step.version).join(', ')}). Queued jobs, schedules and history are kept.\n`,
        stderr: '',
      });
      expect(documentOf(await cli(['schema', 'status', '--json'], oldEnv))).toMatchObject({ installed: SCHEMA_VERSION, status: 'up-to-date', pending: [] });
    } finally {
      await old.drop();
    }
  });

  it('explains a newer schema that still serves this release, and migrate leaves it as it is', async () => {
    const other = await createTestDatabase();
    try {
      const otherEnv = { DATABASE_URL: other.url };
      const newer = SCHEMA_VERSION + 1;
      await other.pool.query('UPDATE workhorse.schema_version SET version = $1', [newer]);
      expect(documentOf(await cli(['schema', 'status', '--json'], otherEnv), 3)).toMatchObject({ installed: newer, oldestClient: 4, compatible: true });
      expect((await cli(['schema', 'status'], otherEnv)).stdout).toMatch(/It still serves this release, whose workers and producers keep working with it/);
      expect(await cli(['schema', 'migrate'], otherEnv)).toEqual({
        code: 0,
        stdout: `The workhorse schema is version ${newer}, newer than this package's ${SCHEMA_VERSION}, and still serves this release. Nothing to do: a schema is never downgraded.\n`,
        stderr: '',
      });
      expect((await other.pool.query('SELECT version FROM workhorse.schema_version')).rows).toEqual([{ version: newer }]);
    } finally {
      await other.drop();
    }
  });

  it('explains a newer schema that no longer serves this release, and migrate refuses it without changing anything', async () => {
    const other = await createTestDatabase();
    try {
      const otherEnv = { DATABASE_URL: other.url };
      const newer = SCHEMA_VERSION + 1;
      await other.pool.query('UPDATE workhorse.schema_version SET version = $1', [newer]);
      await other.pool.query(`CREATE OR REPLACE FUNCTION workhorse.oldest_client_v1() RETURNS integer LANGUAGE sql STABLE AS $$ SELECT ${newer} $$`);
      expect(documentOf(await cli(['schema', 'status', '--json'], otherEnv), 3)).toEqual({
        installed: newer,
        expected: SCHEMA_VERSION,
        minimum: MIN_SCHEMA_VERSION,
        oldestClient: newer,
        upToDate: false,
        compatible: false,
        status: 'newer',
        pending: [],
        workers: [],
      });
      const newerText = await cli(['schema', 'status'], otherEnv);
      expect(newerText).toMatchObject({ code: 3, stderr: '' });
      expect(newerText.stdout).toMatch(new RegExp(`^Installed: version ${newer}\\. This package: version ${SCHEMA_VERSION}\\. Out of date\\.\n`));
      expect(newerText.stdout).toMatch(/newer workhorse schema than this package ships/);
      expect(newerText.stdout).toMatch(new RegExp(`Upgrade this package to the release that ships schema version ${newer}`));

      for (const command of ['migrate', 'install']) {
        const line = errorOf(await cli(['schema', command], otherEnv), 1);
        expect(line).toMatch(new RegExp(`is version ${newer}, newer than this package \\(version ${SCHEMA_VERSION}\\), and it no longer serves this release: upgrade the package`));
      }
      expect((await other.pool.query('SELECT version FROM workhorse.schema_version')).rows).toEqual([{ version: newer }]);
      expect((await other.pool.query('SELECT version, name FROM workhorse.schema_migration')).rows).toEqual([{ version: SCHEMA_VERSION, name: 'install' }]);
    } finally {
      await other.drop();
    }
  });
});

describe('jobs', () => {
  const { db, env, queue, admin } = useCliDatabase();

  describe('get', () => {
    it('--json prints the Admin snapshot; the text view shows its key facts', async () => {
      const q = `get-${randomUUID().slice(0, 8)}`;
      const id = await queue.enqueue('invoice.send', { invoiceId: 'inv-7', cents: 1250 }, { queue: q, priority: 5, maxAttempts: 3, tags: ['billing', 'eu'] });
      const snapshot = await admin.getJob(id);
      expect(documentOf(await cli(['jobs', 'get', id, '--json'], env))).toEqual(viaJson(snapshot));

      const text = await cli(['jobs', 'get', id], env);
      expect(text).toMatchObject({ code: 0, stderr: '' });
      expect(fieldsOf(text.stdout)).toEqual({
        ID: id,
        State: 'ready',
        Queue: q,
        Type: 'invoice.send',
        Priority: '5',
        Attempts: '0 of 3',
        'Retry policy': snapshot?.retryPolicy ? JSON.stringify(snapshot.retryPolicy) : "default (the handler's, else exponential)",
        Tags: 'billing, eu',
        Created: snapshot?.createdAt.toISOString(),
        'Run at': snapshot?.runAt.toISOString(),
        Payload: JSON.stringify(snapshot?.payload),
      });
    });

    it('shows the owning worker of a running job, and the result or error of a finished one', async () => {
      const q = `get-${randomUUID().slice(0, 8)}`;
      const okId = await queue.enqueue('report.build', { month: '2024-05' }, { queue: q });
      const claimed = await claimOne(db.pool, q, { workerId: WORKER });
      const running = await cli(['jobs', 'get', okId], env);
      expect(running.stdout).toMatch(/^State +active$/m);
      expect(running.stdout).toMatch(new RegExp(`^Worker +${WORKER}$`, 'm'));
      expect(running.stdout).toMatch(/^Lease expires +\d{4}-\d\d-\d\dT/m);
      expect(await complete(db.pool, claimed, { rows: 31 })).toBe('succeeded');
      const done = await cli(['jobs', 'get', okId], env);
      expect(done.stdout).toMatch(/^State +succeeded$/m);
      expect(done.stdout).toMatch(/^Result +\{"rows":31\}$/m);
      expect(done.stdout).toMatch(/^Finished +\d{4}-\d\d-\d\dT/m);

      const badId = await queue.enqueue('report.build', null, { queue: q });
      await fail(db.pool, await claimOne(db.pool, q, { workerId: WORKER }), { name: 'BadData', message: 'column 3 is not a number', stack: 'BadData: column 3 is not a number\n    at parse (report.ts:10:5)' }, { nonRetryable: true });
      const failed = await cli(['jobs', 'get', badId], env);
      expect(failed.stdout).toMatch(/^State +failed$/m);
      expect(failed.stdout).toMatch(/^Error +BadData: column 3 is not a number$/m);
      expect(failed.stdout).toMatch(/^Stack +at parse \(report\.ts:10:5\)$/m);
      expect(documentOf<JobSnapshot>(await cli(['jobs', 'get', badId, '--json'], env))).toMatchObject({
        state: 'failed',
        error: { name: 'BadData', message: 'column 3 is not a number' },
      });
    });

    it('refuses a malformed id with exit 2 and the validation message', async () => {
      for (const args of [['jobs', 'get', 'not-a-uuid'], ['jobs', 'get', '12345', '--json']]) {
        expect(errorOf(await cli(args, env), 2)).toBe('workhorse: jobId: must be a job id (a UUID string)');
      }
    });

    it('reports an unknown job with exit 1', async () => {
      const id = randomUUID();
      expect(errorOf(await cli(['jobs', 'get', id], env), 1)).toBe(`workhorse: job ${id} not found`);
      expect(errorOf(await cli(['jobs', 'get', id, '--json'], env), 1)).toBe(`workhorse: job ${id} not found`);
    });
  });

  describe('list', () => {
    let q: string;
    let all: string[];

    beforeAll(async () => {
      q = `list-${randomUUID().slice(0, 8)}`;
      await queue.enqueue('mail.send', { n: 1 }, { queue: q });
      expect(await complete(db.pool, await claimOne(db.pool, q, { workerId: WORKER }), 'sent')).toBe('succeeded');
      await queue.enqueue('mail.send', { n: 2 }, { queue: q });
      await queue.enqueue('pdf.render', { n: 3 }, { queue: q });
      await queue.enqueue('pdf.render', { n: 4 }, { queue: q, runAt: new Date(Date.now() + 3_600_000) });
      const canceled = await queue.enqueue('mail.send', { n: 5 }, { queue: q });
      await admin.cancel(canceled);
      await queue.enqueue('other.job', {}, { queue: `${q}-elsewhere` });
      all = (await admin.listJobs({ queue: q })).items.map((job) => job.id);
      expect(all).toHaveLength(5);
    });

    const ids = (run: CliRun): string[] => documentOf<Page<JobSnapshot>>(run).items.map((job) => job.id);

    it('--json prints a page of snapshots, newest first, filtered by queue, type and state', async () => {
      const page = documentOf<Page<JobSnapshot>>(await cli(['jobs', 'list', '--queue', q, '--json'], env));
      expect(page).toEqual(viaJson(await admin.listJobs({ queue: q })));
      expect(page.nextCursor).toBeNull();

      expect(ids(await cli(['jobs', 'list', '--queue', q, '--type', 'pdf.render', '--json'], env))).toEqual(
        (await admin.listJobs({ queue: q, type: 'pdf.render' })).items.map((job) => job.id),
      );
      const readyOrDone = (await admin.listJobs({ queue: q, states: ['ready', 'succeeded'] })).items.map((job) => job.id);
      expect(readyOrDone).toHaveLength(3);
      expect(ids(await cli(['jobs', 'list', '--queue', q, '--state', 'ready,succeeded', '--json'], env))).toEqual(readyOrDone);
      expect(ids(await cli(['jobs', 'list', '--queue', q, '--state', 'ready', '--state', 'succeeded', '--json'], env))).toEqual(readyOrDone);
      expect(ids(await cli(['jobs', 'list', '--json', '--queue', q, '--state=succeeded, ready'], env))).toEqual(readyOrDone);
      expect(ids(await cli(['jobs', 'list', '--queue', q, '--type', 'mail.send', '--state', 'canceled', '--json'], env))).toEqual([all[0]]);
      expect(ids(await cli(['jobs', 'list', '--queue', 'no-such-queue', '--json'], env))).toEqual([]);
    });

    it('pages with --limit and --cursor: the pages add up to the whole list', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const args = ['jobs', 'list', '--queue', q, '--limit', '2', '--json', ...(cursor ? ['--cursor', cursor] : [])];
        const page: Page<JobSnapshot> = documentOf(await cli(args, env));
        seen.push(...page.items.map((job) => job.id));
        cursor = page.nextCursor;
        pages++;
      } while (cursor !== null && pages < 10);
      expect(seen).toEqual(all);
      expect(pages).toBe(3);
    });

    it('prints an aligned table, a count, and the exact command for the next page', async () => {
      const run = await cli(['jobs', 'list', '--queue', q], env);
      expect(run).toMatchObject({ code: 0, stderr: '' });
      const lines = run.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^ID {36}STATE {6}QUEUE +TYPE +ATTEMPTS +PRIORITY +CREATED$/);
      expect(lines.slice(1, 6).map((line) => line.slice(0, 36))).toEqual(all);
      const jobs = (await admin.listJobs({ queue: q })).items;
      jobs.forEach((job, i) => {
        expect(lines[i + 1].split(/ {2,}/)).toEqual([job.id, job.state, q, job.type, `${job.currentAttempt}/25`, '0', job.createdAt.toISOString()]);
      });
      expect(lines.slice(6)).toEqual(['', '5 jobs.']);

      const first = await cli(['jobs', 'list', '--queue', q, '--state', 'ready', '--state', 'scheduled', '--limit', '1'], env);
      const hint = /^1 jobs shown; more remain\. Next page: (workhorse jobs list .*)$/m.exec(first.stdout);
      expect(hint?.[1]).toMatch(new RegExp(`^workhorse jobs list --queue ${q} --state ready,scheduled --limit 1 --cursor [A-Za-z0-9_-]+$`));
      const second = await cli(hint?.[1].split(' ').slice(1) ?? [], env);
      expect(second.code).toBe(0);
      const expected = (await admin.listJobs({ queue: q, states: ['ready', 'scheduled'] })).items.map((job) => job.id);
      expect(second.stdout.split('\n')[1].slice(0, 36)).toBe(expected[1]);

      expect(await cli(['jobs', 'list', '--queue', 'no-such-queue'], env)).toEqual({ code: 0, stdout: 'No jobs match.\n', stderr: '' });

      // Five jobs and --limit 5: one page, and it says it is the last (no cursor to an empty page).
      const exact = await cli(['jobs', 'list', '--queue', q, '--limit', '5'], env);
      expect(exact.stdout.trimEnd().split('\n').slice(-2)).toEqual(['', '5 jobs.']);
      expect(documentOf(await cli(['jobs', 'list', '--queue', q, '--limit', '5', '--json'], env))).toMatchObject({ nextCursor: null });
    });

    it('refuses bad filters with exit 2 and one line', async () => {
      const cases: [string[], string][] = [
        [['--state', 'done'], '--state: "done" is not a job state (blocked, scheduled, ready, active, succeeded, failed, canceled). Run `workhorse jobs list --help` for usage.'],
        [['--state', 'ready,'], '--state: "" is not a job state (blocked, scheduled, ready, active, succeeded, failed, canceled). Run `workhorse jobs list --help` for usage.'],
        // (Not an integer: the client's; its range is the SQL function's.)
        [['--limit', 'ten'], 'limit: must be an integer'],
        [['--limit', '0'], 'limit: must be an integer from 1 to 1000'],
        [['--limit', '1001'], 'limit: must be an integer from 1 to 1000'],
        [['--limit', '2.5'], 'limit: must be an integer'],
        [['--cursor', 'bm90LWEtY3Vyc29y'], 'cursor: is not a cursor returned by this API'],
        [['--queue', 'bad queue'], 'queue: must be 1 to 128 characters: a letter or digit, then letters, digits or . _ : / -'],
      ];
      for (const [args, message] of cases) {
        expect(errorOf(await cli(['jobs', 'list', ...args], env), 2)).toBe(`workhorse: ${message}`);
      }
    });
  });

  describe('timeline', () => {
    let id: string;

    beforeAll(async () => {
      const q = `timeline-${randomUUID().slice(0, 8)}`;
      id = await queue.enqueue('sync.account', { account: 42 }, { queue: q, maxAttempts: 3 });
      await fail(db.pool, await claimOne(db.pool, q, { workerId: WORKER }), { name: 'Timeout', message: 'upstream slow' }, { retryDelayMs: 60_000 });
      await db.pool.query('UPDATE workhorse.job_runtime SET run_at = clock_timestamp() WHERE job_id = $1', [id]);
      await db.pool.query('SELECT workhorse.promote_v1()');
      expect(await complete(db.pool, await claimOne(db.pool, q, { workerId: WORKER }), { synced: true })).toBe('succeeded');
    });

    it('--json prints the Admin timeline page; --limit and --cursor page through it', async () => {
      const whole = await admin.getJobTimeline(id);
      expect(whole.items.length).toBeGreaterThanOrEqual(6);
      expect(documentOf(await cli(['jobs', 'timeline', id, '--json'], env))).toEqual(viaJson(whole));

      const seen: TimelineEntry[] = [];
      let cursor: string | null = null;
      do {
        const page: Page<TimelineEntry> = documentOf(await cli(['jobs', 'timeline', id, '--limit', '2', '--json', ...(cursor ? ['--cursor', cursor] : [])], env));
        expect(page.items.length).toBeLessThanOrEqual(2);
        seen.push(...page.items);
        cursor = page.nextCursor;
      } while (cursor !== null);
      expect(seen).toEqual(viaJson(whole.items));
    });

    it('prints the login role beside an operator change, and not beside the worker\'s events', async () => {
      const q = `timeline-${randomUUID().slice(0, 8)}`;
      const canceled = await queue.enqueue('sync.account', {}, { queue: q });
      await db.pool.query('SELECT workhorse.cancel_v1($1, $2, $3)', [canceled, 'not needed', 'alice']);
      const { rows } = await db.pool.query<{ login: string }>('SELECT session_user::text AS login');
      const run = await cli(['jobs', 'timeline', canceled], env);
      expect(run.stdout).toMatch(new RegExp(`\\n\\S+ +canceled .* loginRole=${rows[0].login}\\n`));
      expect(run.stdout).not.toMatch(/enqueued .*loginRole=/);
    });

    it('prints the history as a table with the attempt errors', async () => {
      const run = await cli(['jobs', 'timeline', id], env);
      expect(run).toMatchObject({ code: 0, stderr: '' });
      const lines = run.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^AT {24}WHAT +ATTEMPT +WORKER +FENCE +DETAILS$/);
      const whats = lines.slice(1, -2).map((line) => line.split(/ {2,}/)[1]);
      expect(whats[0]).toBe('enqueued');
      expect(whats).toEqual(expect.arrayContaining(['claimed', 'retry_scheduled', 'attempt failed', 'attempt succeeded', 'succeeded']));
      expect(run.stdout).toMatch(new RegExp(`attempt failed +1 +${WORKER} +\\d+ +error="Timeout: upstream slow" took=\\d+ms\n`));
      expect(run.stdout).toMatch(/retry_scheduled .*error="Timeout: upstream slow"/);
      const total = (await admin.getJobTimeline(id)).items.length;
      expect(lines.slice(-2)).toEqual(['', `${total} entries.`]);

      const paged = await cli(['jobs', 'timeline', id, '--limit', '3'], env);
      expect(paged.stdout).toMatch(new RegExp(`^3 entries shown; more remain\\. Next page: workhorse jobs timeline ${id} --limit 3 --cursor [A-Za-z0-9_-]+$`, 'm'));
      // A limit the timeline exactly fills: one page, the last.
      const exact = await cli(['jobs', 'timeline', id, '--limit', String(total)], env);
      expect(exact.stdout.trimEnd().split('\n').slice(-2)).toEqual(['', `${total} entries.`]);
    });

    it('reports an unknown job (exit 1) and a malformed id (exit 2)', async () => {
      const unknown = randomUUID();
      expect(errorOf(await cli(['jobs', 'timeline', unknown], env), 1)).toBe(`workhorse: job ${unknown} not found`);
      expect(errorOf(await cli(['jobs', 'timeline', 'nope', '--json'], env), 2)).toBe('workhorse: jobId: must be a job id (a UUID string)');
      expect(errorOf(await cli(['jobs', 'timeline', id, '--cursor', 'x'], env), 2)).toBe('workhorse: cursor: is not a cursor returned by this API');
    });
  });

  describe('cancel', () => {
    it('cancels a waiting job at once, with the reason stored', async () => {
      const q = `cancel-${randomUUID().slice(0, 8)}`;
      const id = await queue.enqueue('mail.send', null, { queue: q });
      expect(documentOf(await cli(['jobs', 'cancel', id, '--reason', 'customer withdrew', '--json'], env))).toEqual({
        id,
        status: 'canceled',
        state: 'canceled',
      });
      expect(await admin.getJob(id)).toMatchObject({ state: 'canceled', error: { name: 'Canceled', message: 'customer withdrew' } });

      const other = await queue.enqueue('mail.send', null, { queue: q, runAt: new Date(Date.now() + 60_000) });
      expect(await cli(['jobs', 'cancel', other], env)).toEqual({ code: 0, stdout: `Canceled job ${other}.\n`, stderr: '' });
    });

    it('asks the worker of a running job to stop, and leaves a finished job as it is', async () => {
      const q = `cancel-${randomUUID().slice(0, 8)}`;
      const id = await queue.enqueue('mail.send', null, { queue: q });
      const claimed = await claimOne(db.pool, q, { workerId: WORKER });
      const text = await cli(['jobs', 'cancel', id], env);
      expect(text).toMatchObject({ code: 0, stderr: '' });
      expect(text.stdout).toBe(
        `Cancel requested for job ${id}: it is running on worker ${WORKER}. ` +
          'The worker stops the handler when it next renews its lease, and the job ends canceled.\n',
      );
      expect(documentOf(await cli(['jobs', 'cancel', id, '--json'], env))).toEqual({ id, status: 'cancel_requested', state: 'active' });
      expect((await admin.getJob(id))?.cancelRequestedAt).toBeInstanceOf(Date);

      await db.pool.query('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3)', [id, WORKER, claimed.fence]);
      expect((await admin.getJob(id))?.state).toBe('canceled');
      expect(documentOf(await cli(['jobs', 'cancel', id, '--json'], env))).toEqual({ id, status: 'already_terminal', state: 'canceled' });

      const doneId = await queue.enqueue('mail.send', null, { queue: q });
      expect(await complete(db.pool, await claimOne(db.pool, q, { workerId: WORKER }), null)).toBe('succeeded');
      expect(await cli(['jobs', 'cancel', doneId], env)).toEqual({
        code: 0,
        stdout: `Job ${doneId} already ended (succeeded); nothing to cancel.\n`,
        stderr: '',
      });
    });

    it('reports an unknown job (exit 1), a malformed id and an over-long reason (exit 2)', async () => {
      const unknown = randomUUID();
      expect(errorOf(await cli(['jobs', 'cancel', unknown], env), 1)).toBe(`workhorse: job ${unknown} not found`);
      expect(errorOf(await cli(['jobs', 'cancel', 'abc'], env), 2)).toBe('workhorse: jobId: must be a job id (a UUID string)');
      const id = await queue.enqueue('mail.send', null, { queue: 'cancel-reason' });
      expect(errorOf(await cli(['jobs', 'cancel', id, '--reason', 'x'.repeat(1001)], env), 2)).toBe(
        'workhorse: reason: must be a string of at most 1000 characters',
      );
      expect((await admin.getJob(id))?.state).toBe('ready');
    });
  });
});

describe('bin/workhorse.js as a real process', () => {
  const { db } = useTestDatabase({ installSchema: false, checkInvariants: false });
  const temporary: string[] = [];

  afterAll(() => {
    for (const dir of temporary) rmSync(dir, { recursive: true, force: true });
  });

  function run(script: string, args: string[], env: Env): Promise<CliRun> {
    return new Promise((done, failed) => {
      const child = spawn(process.execPath, [script, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
      child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
      child.on('error', failed);
      child.on('close', (code) => done({ code: code ?? -1, stdout, stderr }));
    });
  }

  /** A copy of the checkout's shape without dist/: bin/ copied, lib/ and scripts/ (and node_modules/) linked. */
  function sourceCheckout(withNodeModules: boolean): string {
    const dir = mkdtempSync(join(tmpdir(), 'workhorse-cli-'));
    temporary.push(dir);
    mkdirSync(join(dir, 'bin'));
    copyFileSync(join(ROOT, 'bin', 'workhorse.js'), join(dir, 'bin', 'workhorse.js'));
    symlinkSync(join(ROOT, 'lib'), join(dir, 'lib'));
    symlinkSync(join(ROOT, 'scripts'), join(dir, 'scripts'));
    if (withNodeModules) symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    return dir;
  }

  it('`node bin/workhorse.js schema status --json` works and exits with the status code', async () => {
    const env = { ...process.env, DATABASE_URL: db.url };
    const before = await run(join(ROOT, 'bin', 'workhorse.js'), ['schema', 'status', '--json'], env);
    expect(JSON.parse(before.stdout)).toEqual({
      installed: null,
      expected: SCHEMA_VERSION,
      minimum: MIN_SCHEMA_VERSION,
      oldestClient: null,
      upToDate: false,
      compatible: false,
      status: 'not-installed',
      pending: [],
      workers: [],
    });
    expect(before).toMatchObject({ code: 3, stderr: '' });

    expect((await cli(['schema', 'install'], env)).code).toBe(0);

    // Exactly the source-checkout path, whether or not someone has built dist/ meanwhile.
    const checkout = sourceCheckout(true);
    const after = await run(join(checkout, 'bin', 'workhorse.js'), ['schema', 'status', '--json'], env);
    expect(after).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(after.stdout)).toMatchObject({ installed: SCHEMA_VERSION, expected: SCHEMA_VERSION, upToDate: true, status: 'up-to-date', pending: [] });

    const missing = await run(join(checkout, 'bin', 'workhorse.js'), ['jobs', 'get', randomUUID()], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^workhorse: job [0-9a-f-]{36} not found\n$/);
  });

  it('says to build when neither dist/ nor TypeScript is there', async () => {
    const checkout = sourceCheckout(false);
    const result = await run(join(checkout, 'bin', 'workhorse.js'), ['--help'], { PATH: process.env.PATH, NODE_PATH: '' });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^workhorse: cannot start: .*run `npm install` and `npm run build` first\.\n$/);
  });
});
