/**
 * `workhorse schedules list|pause|resume|trigger` against a real database: `--json` documents
 * checked against the Admin API, the text output's key facts, changes recorded in the schedule's
 * history with the actor, and exit codes (unknown schedule 1, bad input 2).
 */
import { userInfo } from 'node:os';
import { Queue, type ScheduleInfo } from '../../lib/core';
import { cli, cliConnections, documentOf, errorOf, viaJson, type Env } from './cli-harness';
import { useTestDatabase } from '../support/test-database';

const ME = userInfo().username;

describe('help and usage', () => {
  it.each([
    [['schedules', '--help'], 'Usage: workhorse schedules <command> [options]'],
    [['schedules', 'list', '--help'], 'Usage: workhorse schedules list [options]'],
    [['schedules', 'pause', '--help'], 'Usage: workhorse schedules pause KEY [options]'],
    [['schedules', 'resume', '--help'], 'Usage: workhorse schedules resume KEY [options]'],
    [['schedules', 'trigger', '--help'], 'Usage: workhorse schedules trigger KEY [options]'],
  ])('workhorse %j prints its help without a database', async (args, usage) => {
    const run = await cli(args, {});
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout.startsWith(`${usage}\n`)).toBe(true);
  });

  it.each([
    [['schedules'], '`workhorse schedules` needs a command: list, pause, resume, trigger. Run `workhorse schedules --help` for usage.'],
    [['schedules', 'trigger'], 'missing argument KEY. Run `workhorse schedules trigger --help` for usage.'],
  ])('workhorse %j exits 2 before touching the database', async (args, message) => {
    expect(errorOf(await cli(args, { DATABASE_URL: 'postgres://unused@127.0.0.1:1/x' }), 2)).toBe(`workhorse: ${message}`);
  });
});

describe('against a database', () => {
  const { db, admin } = useTestDatabase({
    checkInvariants: false,
    beforeDrop: async (created) => { if (created) expect(await cliConnections(db)).toBe(0); },
  });
  let env: Env;

  beforeAll(async () => {
    env = { DATABASE_URL: db.url };
    const queue = new Queue(db.pool);
    await queue.syncSchedules('default', [
      { key: 'reports.nightly', type: 'report.daily', cron: '0 6 * * *', timezone: 'Europe/Berlin', options: { queue: 'reports' } },
    ]);
    await queue.syncSchedules('billing', [{ key: 'invoices', type: 'invoice.run', cron: '0 3 1 * *' }]);
  });

  it('list: --json is Admin.listSchedules, --namespace narrows it, and the table shows the key facts', async () => {
    expect(documentOf<ScheduleInfo[]>(await cli(['schedules', 'list', '--json'], env))).toEqual(viaJson(await admin.listSchedules()));
    const billing = documentOf<ScheduleInfo[]>(await cli(['schedules', 'list', '--namespace', 'billing', '--json'], env));
    expect(billing.map((s) => s.key)).toEqual(['invoices']);
    const run = await cli(['schedules', 'list'], env);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAMESPACE +KEY +STATE +TYPE +CRON +TIME ZONE +NEXT RUN +LAST RUN +LAST JOB +LAST ERROR$/);
    const [first] = await admin.listSchedules({ namespace: 'billing' });
    expect(lines[1].split(/ {2,}/)).toEqual(['billing', 'invoices', 'active', 'invoice.run', '0 3 1 * *', 'UTC', first.nextRunAt?.toISOString(), '-', '-', '-']);
    expect(lines.slice(-2)).toEqual(['', '2 schedules.']);
    expect((await cli(['schedules', 'list', '--namespace', 'none'], env)).stdout).toBe('No schedules in namespace none.\n');
  });

  it('pause, resume and trigger change the schedule, say so, and record who', async () => {
    expect((await cli(['schedules', 'pause', 'reports.nightly', '--reason', 'freeze'], env)).stdout).toBe(
      'Paused schedule reports.nightly: its occurrences are skipped until it is resumed.\n',
    );
    expect(documentOf(await cli(['schedules', 'pause', 'reports.nightly', '--json'], env))).toEqual({
      key: 'reports.nightly',
      namespace: 'default',
      changed: false,
    });
    const [paused] = await admin.listSchedules({ namespace: 'default' });
    expect(paused).toMatchObject({ state: 'paused', pausedBy: ME, pauseReason: 'freeze' });

    const triggered = documentOf<{ jobId: string }>(await cli(['schedules', 'trigger', 'reports.nightly', '--actor', 'ops', '--json'], env));
    expect(await admin.getJob(triggered.jobId)).toMatchObject({ type: 'report.daily', queue: 'reports' });
    const text = await cli(['schedules', 'trigger', 'invoices', '--namespace', 'billing'], env);
    expect(text.stdout).toMatch(/^Triggered schedule invoices: enqueued job [0-9a-f-]{36}\.\n$/);

    expect((await cli(['schedules', 'resume', 'reports.nightly'], env)).stdout).toBe(
      'Resumed schedule reports.nightly: it fires again from its next occurrence.\n',
    );
    expect((await cli(['schedules', 'resume', 'reports.nightly'], env)).stdout).toBe('Schedule reports.nightly was not paused; nothing changed.\n');
    const history = await admin.getScheduleHistory('reports.nightly');
    expect(history.map((h) => [h.change, h.actor, h.jobId])).toEqual([
      ['resumed', ME, null],
      ['triggered', 'ops', triggered.jobId],
      ['paused', ME, null],
      ['created', null, null],
    ]);
  });

  it('an unknown schedule exits 1; a bad key or a too long reason exits 2', async () => {
    expect(errorOf(await cli(['schedules', 'pause', 'nope'], env), 1)).toBe('workhorse: no schedule "nope" in namespace "default"');
    expect(errorOf(await cli(['schedules', 'trigger', 'reports.nightly', '--namespace', 'billing'], env), 1)).toBe(
      'workhorse: no schedule "reports.nightly" in namespace "billing"',
    );
    expect(errorOf(await cli(['schedules', 'resume', 'bad key'], env), 2)).toMatch(/^workhorse: key: must be 1 to 128 characters/);
    expect(errorOf(await cli(['schedules', 'pause', 'invoices', '--namespace', 'billing', '--reason', 'x'.repeat(1001)], env), 2)).toBe(
      'workhorse: reason: must be a string of at most 1000 characters',
    );
  });
});
