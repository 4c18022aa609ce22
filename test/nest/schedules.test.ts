/**
 * Schedules in Nest: declared with `@JobHandler(type, { schedule })` (several per handler) and
 * `forRoot({ schedules })`, synced into `scheduleNamespace` on bootstrap by a process with a
 * worker (a web-only process syncs only when told to), fired by the module's worker; invalid
 * cron expressions and zones are the core's typed errors, before anything starts.
 */
import { Injectable, Logger } from '@nestjs/common';
import {
  InvalidCronError,
  JobHandler,
  UnknownTimeZoneError,
  WorkhorseConfigurationError,
  WorkhorseModule,
  WorkhorseScheduler,
} from 'nestjs-workhorse';
import { Queue as CoreQueue } from 'nestjs-workhorse/core';
import { decidedOccurrencesOf } from '../support/schedules';
import { waitFor } from '../support/wait';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

const ran: string[] = [];

@Injectable()
class ReportHandlers {
  @JobHandler('report.daily', {
    queue: 'reports',
    schedule: [
      { cron: '0 6 * * *', timezone: 'Europe/Berlin', payload: { format: 'pdf' } },
      { key: 'report.every-second', cron: '* * * * * *', payload: { format: 'csv' }, missedAfterMs: 5000 },
    ],
  })
  async daily(payload: { format: string }): Promise<void> {
    ran.push(payload.format);
  }

  @JobHandler('cleanup.run')
  async cleanup(): Promise<void> {
    ran.push('cleanup');
  }
}

const { db, admin } = useTestDatabase();

beforeAll(async () => {
  quietNestLogs();
});

it('syncs the handlers and the module schedules on bootstrap, and the worker fires them', async () => {
  const moduleRef = await startModule({
    imports: [
      WorkhorseModule.forRoot({
        pool: db.pool,
        worker: { queues: ['default'], tickMs: 100, pollMs: 50 },
        scheduleNamespace: 'app',
        schedules: [{ key: 'cleanup.nightly', type: 'cleanup.run', cron: '30 3 * * *' }],
      }),
    ],
    providers: [ReportHandlers],
  });
  try {
    expect(moduleRef.get(WorkhorseScheduler).namespace).toBe('app');
    const schedules = await admin.listSchedules({ namespace: 'app' });
    expect(schedules.map((s) => [s.key, s.type, s.cron, s.timezone, s.options, s.payload, s.state])).toEqual([
      ['cleanup.nightly', 'cleanup.run', '30 3 * * *', 'UTC', {}, {}, 'active'],
      ['report.daily', 'report.daily', '0 6 * * *', 'Europe/Berlin', { queue: 'reports' }, { format: 'pdf' }, 'active'],
      ['report.every-second', 'report.daily', '* * * * * *', 'UTC', { queue: 'reports' }, { format: 'csv' }, 'active'],
    ]);
    await waitFor(() => ran.includes('csv'), 20_000, 'the every-second schedule to run its handler');
    const fired = await decidedOccurrencesOf(db.pool, 'report.every-second', 'app');
    expect(fired[0]).toMatchObject({ state: 'fired' });
    expect(await admin.getJob(fired[0].job_id ?? '')).toMatchObject({ queue: 'reports', payload: { format: 'csv' } });
  } finally {
    await moduleRef.close();
  }
  // A restart with the same code changes nothing.
  const again = await startModule({
    imports: [
      WorkhorseModule.forRoot({
        pool: db.pool,
        worker: { queues: ['default'], tickMs: 60_000 },
        scheduleNamespace: 'app',
        schedules: [{ key: 'cleanup.nightly', type: 'cleanup.run', cron: '30 3 * * *' }],
      }),
    ],
    providers: [ReportHandlers],
  });
  await again.close();
  expect((await admin.listSchedules({ namespace: 'app' })).map((s) => s.revision)).toEqual([1, 1, 1]);
  await new CoreQueue(db.pool).syncSchedules('app', []);
});

it('a web-only process does not sync, unless syncSchedules: true', async () => {
  const webOnly = await startModule({
    imports: [WorkhorseModule.forRoot({ pool: db.pool, scheduleNamespace: 'web' })],
    providers: [ReportHandlers],
  });
  await webOnly.close();
  expect(await admin.listSchedules({ namespace: 'web' })).toEqual([]);

  const syncing = await startModule({
    imports: [WorkhorseModule.forRoot({ pool: db.pool, scheduleNamespace: 'web', syncSchedules: true })],
    providers: [ReportHandlers],
  });
  await syncing.close();
  expect((await admin.listSchedules({ namespace: 'web' })).map((s) => s.key)).toEqual(['report.daily', 'report.every-second']);
  await new CoreQueue(db.pool).syncSchedules('web', []);
});

it('a worker that declares no schedule leaves the namespace alone and warns about its active schedules', async () => {
  await new CoreQueue(db.pool).syncSchedules('shared', [{ key: 'theirs', type: 'x', cron: '@daily' }]);
  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  try {
    const moduleRef = await startModule({
      imports: [WorkhorseModule.forRoot({ pool: db.pool, worker: { tickMs: 60_000 }, scheduleNamespace: 'shared' })],
    });
    await moduleRef.close();
    expect(warn.mock.calls.map((call) => String(call[0]))).toContainEqual(
      expect.stringMatching(/Namespace "shared" has 1 active schedule\(s\) this application does not declare \(theirs\)/),
    );
  } finally {
    warn.mockRestore();
  }
  expect((await admin.listSchedules({ namespace: 'shared' })).map((s) => s.state)).toEqual(['active']);
});

describe('refusals before anything starts', () => {
  it('an invalid cron expression or zone on a handler is the typed error, naming the schedule, at bootstrap', async () => {
    // The server reads expressions and zones: the sync on bootstrap refuses them, before the worker starts.
    @Injectable()
    class BadCron {
      @JobHandler('bad.cron', { schedule: { key: 'bad.one', cron: '0 0 * * * * *' } })
      run(): void {}
    }
    @Injectable()
    class BadZone {
      @JobHandler('bad.zone', { schedule: { cron: '@daily', timezone: 'Europe/Atlantis' } })
      run(): void {}
    }
    const worker = { tickMs: 60_000 };
    const cronError = await startModule({
      imports: [WorkhorseModule.forRoot({ pool: db.pool, worker, scheduleNamespace: 'bad-cron' })],
      providers: [BadCron],
    }).catch((e: unknown) => e);
    expect(cronError).toBeInstanceOf(InvalidCronError);
    expect((cronError as InvalidCronError).scheduleKey).toBe('bad.one');
    await expect(
      startModule({ imports: [WorkhorseModule.forRoot({ pool: db.pool, worker, scheduleNamespace: 'bad-zone' })], providers: [BadZone] }),
    ).rejects.toThrow(/schedule "bad\.zone" names an unknown time zone "Europe\/Atlantis"/);
    expect(await admin.listSchedules({ namespace: 'bad-cron' })).toEqual([]);
    expect(() => {
      class Bad {
        @JobHandler('bad.keys', { schedule: [{ cron: '@daily' }, { cron: '@hourly' }] })
        run(): void {}
      }
      return Bad;
    }).toThrow(WorkhorseConfigurationError);
  });

  it('so are the module schedules, and keys declared twice', async () => {
    await expect(
      startModule({
        imports: [WorkhorseModule.forRoot({ pool: db.pool, worker: { tickMs: 60_000 }, schedules: [{ key: 'z', type: 'x', cron: '@daily', timezone: 'Nowhere/City' }] })],
      }),
    ).rejects.toBeInstanceOf(UnknownTimeZoneError);
    await expect(
      // (The value is sync_schedules_v1's to check: the module that syncs refuses to start.)
      startModule({
        imports: [WorkhorseModule.forRoot({ pool: db.pool, worker: { tickMs: 60_000 }, schedules: [{ key: 'z', type: 'x', cron: '@daily', overlap: 'never' as 'skip' }] })],
      }),
    ).rejects.toThrow(/\[0\]\.overlap: must be "allow" or "skip"/);
    await expect(
      startModule({
        imports: [
          WorkhorseModule.forRoot({
            pool: db.pool,
            worker: { tickMs: 60_000 },
            scheduleNamespace: 'dup',
            schedules: [{ key: 'report.daily', type: 'x', cron: '@daily' }],
          }),
        ],
        providers: [ReportHandlers],
      }),
    ).rejects.toThrow(/Two schedules have the key "report\.daily" \(WorkhorseModule\.forRoot and ReportHandlers\.daily\)/);
    expect(await admin.listSchedules({ namespace: 'dup' })).toEqual([]);
  });
});
