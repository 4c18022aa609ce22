/**
 * Cron schedules through the public core API: queue.syncSchedules (desired state of a namespace,
 * revisions and history, typed errors), firing on workers' ticks (one job per occurrence, the
 * payload and options of the definition), overlap, catch-up after a simulated outage, pause,
 * resume and trigger, and a definition changed while workers run.
 */
import {
  InvalidCronError,
  ScheduleNotFoundError,
  UnknownTimeZoneError,
  Worker,
  WorkhorseValidationError,
  type ScheduleDefinition,
} from '../../lib/core';
import { runTick } from '../../lib/core/worker/tick';
import { decidedOccurrencesOf, occurrencesOf, scheduledJobsOf, simulateOutage } from '../support/schedules';
import { useTestDatabase } from '../support/test-database';
import { gate, waitFor } from '../support/wait';

const { pool, queue, admin } = useTestDatabase({
  afterEachTest: () => Promise.all(workers.splice(0).map((w) => w.stop())),
  beforeDrop: () => Promise.all(workers.map((w) => w.stop())),
});
const workers: Worker[] = [];

/** A worker that ticks often and runs no-op handlers for `types` (so jobs do not stay live). */
function startWorker(types: string[], options: { queues?: string[]; handler?: () => Promise<unknown> } = {}): Worker {
  const worker = new Worker(queue, { queues: options.queues ?? ['default'], tickMs: 100, pollMs: 50, concurrency: 5 });
  for (const type of types) worker.handle(type, options.handler ?? (async () => null));
  workers.push(worker);
  void worker.run();
  return worker;
}

const everySecond = (key: string, type: string, extra: Partial<ScheduleDefinition> = {}): ScheduleDefinition => ({
  key,
  type,
  cron: '* * * * * *',
  ...extra,
});

describe('syncSchedules', () => {
  it('creates, updates, leaves alone, disables and enables again, each change a revision in the history', async () => {
    const ns = 'sync-lifecycle';
    const a: ScheduleDefinition = { key: 'a', type: 'report.a', cron: '0 6 * * *', timezone: 'Europe/Berlin', payload: { n: 1 } };
    const b: ScheduleDefinition = { key: 'b', type: 'report.b', cron: '@hourly' };
    expect(await queue.syncSchedules(ns, [a, b])).toEqual([
      { key: 'a', change: 'created', revision: 1 },
      { key: 'b', change: 'created', revision: 1 },
    ]);
    expect(await queue.syncSchedules(ns, [a, b])).toEqual([
      { key: 'a', change: 'unchanged', revision: 1 },
      { key: 'b', change: 'unchanged', revision: 1 },
    ]);
    // Defaults given explicitly are the same definition.
    expect(await queue.syncSchedules(ns, [{ ...a, catchUp: 'skip', overlap: 'allow', missedAfterMs: 60_000 }, b])).toEqual([
      { key: 'a', change: 'unchanged', revision: 1 },
      { key: 'b', change: 'unchanged', revision: 1 },
    ]);
    expect(await queue.syncSchedules(ns, [{ ...a, payload: { n: 2 } }])).toEqual([
      { key: 'a', change: 'updated', revision: 2 },
      { key: 'b', change: 'disabled', revision: 2 },
    ]);
    expect(await queue.syncSchedules(ns, [{ ...a, payload: { n: 2 } }, b])).toEqual([
      { key: 'a', change: 'unchanged', revision: 2 },
      { key: 'b', change: 'enabled', revision: 3 },
    ]);

    const listed = await admin.listSchedules({ namespace: ns });
    expect(listed.map((s) => [s.key, s.state, s.revision, s.type, s.cron, s.timezone, s.payload])).toEqual([
      ['a', 'active', 2, 'report.a', '0 6 * * *', 'Europe/Berlin', { n: 2 }],
      ['b', 'active', 3, 'report.b', '@hourly', 'UTC', {}],
    ]);
    // Planned as soon as synced: the next 06:00 in Berlin, the next full hour.
    const now = Date.now();
    const [nextA, nextB] = listed.map((s) => s.nextRunAt?.getTime() ?? 0);
    expect(nextA).toBeGreaterThan(now);
    expect(nextA - now).toBeLessThanOrEqual(86_400_000);
    expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit' }).format(nextA)).toBe('06:00');
    expect(nextB % 3_600_000).toBe(0);
    expect(nextB - now).toBeLessThanOrEqual(3_600_000);

    const history = await admin.getScheduleHistory('b', { namespace: ns });
    expect(history.map((h) => [h.revision, h.change, h.definition?.cron ?? null])).toEqual([
      [3, 'enabled', '@hourly'],
      [2, 'disabled', null],
      [1, 'created', '@hourly'],
    ]);
    const historyA = await admin.getScheduleHistory('a', { namespace: ns });
    expect(historyA.map((h) => [h.revision, h.change, h.definition?.payload])).toEqual([
      [2, 'updated', { n: 2 }],
      [1, 'created', { n: 1 }],
    ]);
  });

  it('keeps namespaces apart: a sync disables only keys of its own namespace', async () => {
    await queue.syncSchedules('ns-one', [{ key: 'same', type: 't.one', cron: '@daily' }]);
    await queue.syncSchedules('ns-two', [{ key: 'same', type: 't.two', cron: '@daily' }]);
    expect(await queue.syncSchedules('ns-one', [])).toEqual([{ key: 'same', change: 'disabled', revision: 2 }]);
    const states = (await admin.listSchedules()).filter((s) => s.key === 'same').map((s) => [s.namespace, s.state]);
    expect(states).toEqual([
      ['ns-one', 'disabled'],
      ['ns-two', 'active'],
    ]);
  });

  it('refuses an invalid cron expression or an unknown zone with a typed error naming the schedule, writing nothing', async () => {
    const ns = 'sync-invalid';
    const good: ScheduleDefinition = { key: 'good', type: 'g', cron: '@daily' };
    const cases: [ScheduleDefinition, new (...args: never[]) => Error, RegExp][] = [
      [{ key: 'bad.minute', type: 'x', cron: '61 * * * *' }, InvalidCronError, /schedule "bad\.minute" has an invalid cron expression "61 \* \* \* \*"/],
      [{ key: 'bad.fields', type: 'x', cron: '* * *' }, InvalidCronError, /schedule "bad\.fields"/],
      [{ key: 'bad.years', type: 'x', cron: '0 0 0 1 1 * 2030' }, InvalidCronError, /schedule "bad\.years"/],
      [{ key: 'never', type: 'x', cron: '0 0 31 2 *' }, InvalidCronError, /schedule "never" .*never occurs/],
      [{ key: 'bad.zone', type: 'x', cron: '@daily', timezone: 'Mars/Olympus_Mons' }, UnknownTimeZoneError, /schedule "bad\.zone" names an unknown time zone "Mars\/Olympus_Mons"/],
    ];
    for (const [definition, type, message] of cases) {
      const error = await queue.syncSchedules(ns, [good, definition]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(type);
      expect(error).toBeInstanceOf(WorkhorseValidationError);
      expect((error as Error).message).toMatch(message);
      expect((error as InvalidCronError).scheduleKey).toBe(definition.key);
    }
    const fieldErrors: [unknown, string][] = [
      [[{ key: 'k', type: 'x', cron: '@daily', catchUp: 'some' }], 'definitions[0].catchUp'],
      [[{ key: 'k', type: 'x', cron: '@daily', catchUpLimit: 1001 }], 'definitions[0].catchUpLimit'],
      [[{ key: 'k', type: 'x', cron: '@daily', overlap: 'queue' }], 'definitions[0].overlap'],
      [[{ key: 'k', type: 'x', cron: '@daily', missedAfterMs: 10 }], 'definitions[0].missedAfterMs'],
      [[{ key: 'k', type: 'x', cron: '@daily', options: { runAt: new Date() } }], 'definitions[0].options.runAt'],
      // (Named by sync_schedules_v1, where the option is: under options, as runAt above.)
      [[{ key: 'k', type: 'x', cron: '@daily', options: { priority: 101 } }], 'definitions[0].options.priority'],
      [[{ key: 'k', type: 'x', cron: '@daily', payload: { n: 1n } }], 'definitions[0].payload.n'],
      [[{ key: 'k', type: 'x', cron: '@daily', every: 5 }], 'definitions[0].every'],
      [[good, good], 'definitions[1].key'],
      [[{ key: '', type: 'x', cron: '@daily' }], 'definitions[0].key'],
    ];
    for (const [definitions, field] of fieldErrors) {
      const error = await queue.syncSchedules(ns, definitions as ScheduleDefinition[]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkhorseValidationError);
      expect((error as WorkhorseValidationError).field).toBe(field);
    }
    expect(await admin.listSchedules({ namespace: ns })).toEqual([]);
  });

  it('is checked again by the SQL function, for clients in other languages', async () => {
    const call = (definitions: unknown) =>
      pool.query('SELECT * FROM workhorse.sync_schedules_v1($1, $2::jsonb)', ['sql-checks', JSON.stringify(definitions)]).catch((e: { code: string; column: string }) => e);
    const refusals: [unknown, string][] = [
      [[{ key: 'k', type: 'x' }], 'definitions[0].cron'],
      [[{ key: 'k', type: 'x', cron: '@daily', timezone: 'not a zone' }], 'definitions[0].timezone'],
      [[{ key: 'k', type: 'x', cron: '@daily', catchUp: 'never' }], 'definitions[0].catchUp'],
      [[{ key: 'k', type: 'x', cron: '@daily', options: { deadline: '2030-01-01T00:00:00Z' } }], 'definitions[0].options.deadline'],
      [[{ key: 'k', type: 'x', cron: '@daily', options: { maxAttempts: 0 } }], 'definitions[0].options.maxAttempts'],
      [[{ key: 'k', type: 'x', cron: '@daily' }, { key: 'k', type: 'y', cron: '@daily' }], 'definitions[1].key'],
    ];
    for (const [definitions, column] of refusals) {
      expect(await call(definitions)).toMatchObject({ code: 'P1001', column });
    }
    expect(await admin.listSchedules({ namespace: 'sql-checks' })).toEqual([]);
  });
});

describe('firing', () => {
  it('enqueues one job per occurrence, with the definition payload and options, on workers ticks', async () => {
    const type = 'fire.every-second';
    await queue.syncSchedules('default', [
      everySecond('fire-once', type, { payload: { report: 'daily' }, options: { queue: 'fire-q', priority: 7, tags: ['cron'] } }),
    ]);
    startWorker([type], { queues: ['fire-q'] });
    startWorker([type], { queues: ['fire-q'] });
    const fired = await waitFor(async () => {
      const decided = await decidedOccurrencesOf(pool, 'fire-once');
      return decided.length >= 4 && decided;
    }, 20_000, 'four occurrences to be decided');
    await queue.syncSchedules('default', []);
    expect(fired.every((o) => o.state === 'fired')).toBe(true);
    const jobs = await scheduledJobsOf(pool, type);
    const occurrences = await decidedOccurrencesOf(pool, 'fire-once');
    // Exactly one job per fired occurrence, and each job names its occurrence.
    expect(jobs.map((j) => j.id).sort()).toEqual(occurrences.map((o) => o.job_id).sort());
    expect(jobs.map((j) => new Date(j.occurrence ?? '').getTime()).sort()).toEqual(occurrences.map((o) => o.at.getTime()));
    // Consecutive seconds: none skipped.
    const times = occurrences.map((o) => o.at.getTime());
    expect(times.slice(1).map((t, i) => t - times[i])).toEqual(times.slice(1).map(() => 1000));
    const snapshot = await admin.getJob(jobs[0].id);
    expect(snapshot).toMatchObject({ queue: 'fire-q', priority: 7, tags: ['cron'], payload: { report: 'daily' }, type });
    const [info] = (await admin.listSchedules({ namespace: 'default' })).filter((s) => s.key === 'fire-once');
    expect(info.lastJobId).toBe(jobs[jobs.length - 1].id);
    expect(info.lastRunAt?.getTime()).toBe(times[times.length - 1]);
    expect(info.state).toBe('disabled');
  });

  it('with overlap skip, skips occurrences while the previous job is live', async () => {
    const type = 'fire.overlap';
    const release = gate();
    await queue.syncSchedules('overlap', [everySecond('slow', type, { overlap: 'skip', options: { queue: 'overlap-q' } })]);
    startWorker([type], { queues: ['overlap-q'], handler: () => release.promise });
    const decided = await waitFor(async () => {
      const rows = await decidedOccurrencesOf(pool, 'slow', 'overlap');
      return rows.filter((o) => o.reason === 'overlap').length >= 2 && rows;
    }, 20_000, 'two occurrences skipped for overlap');
    release.open();
    await queue.syncSchedules('overlap', []);
    expect(decided[0].state).toBe('fired');
    // While the first job runs, every later occurrence is skipped.
    expect(decided.slice(1).map((o) => [o.state, o.reason])).toEqual(decided.slice(1).map(() => ['skipped', 'overlap']));
    expect((await scheduledJobsOf(pool, type)).length).toBe(1);
  });

  it('pauses (occurrences skipped), resumes (nothing caught up) and triggers now', async () => {
    const ns = 'operate';
    const type = 'fire.operate';
    await queue.syncSchedules(ns, [everySecond('op', type, { catchUp: 'all', options: { queue: 'operate-q' } })]);
    expect(await admin.pauseSchedule('op', { namespace: ns, actor: 'ops', reason: 'maintenance' })).toBe(true);
    expect(await admin.pauseSchedule('op', { namespace: ns })).toBe(false);
    const [paused] = await admin.listSchedules({ namespace: ns });
    expect(paused).toMatchObject({ state: 'paused', pausedBy: 'ops', pauseReason: 'maintenance', nextRunAt: null, revision: 2 });

    startWorker([type], { queues: ['operate-q'] });
    await waitFor(async () => (await decidedOccurrencesOf(pool, 'op', ns)).length >= 2, 20_000, 'paused occurrences to be skipped');
    const triggered = await admin.triggerSchedule('op', { namespace: ns, actor: 'ops' });
    expect(await admin.getJob(triggered)).toMatchObject({ type, queue: 'operate-q' });

    expect(await admin.resumeSchedule('op', { namespace: ns })).toBe(true);
    const resumedAt = Date.now();
    expect(await admin.resumeSchedule('op', { namespace: ns })).toBe(false);
    await waitFor(async () => (await decidedOccurrencesOf(pool, 'op', ns)).some((o) => o.state === 'fired'), 20_000, 'a fire after resume');
    await admin.pauseSchedule('op', { namespace: ns });

    const occurrences = await decidedOccurrencesOf(pool, 'op', ns);
    const skipped = occurrences.filter((o) => o.state === 'skipped');
    const fired = occurrences.filter((o) => o.state === 'fired');
    expect(skipped.every((o) => o.reason === 'paused')).toBe(true);
    // Nothing from the paused time was caught up, although catchUp is 'all'. A trigger is no
    // change of the definition: it keeps the revision.
    expect(Math.max(...skipped.map((o) => o.at.getTime()))).toBeLessThan(Math.min(...fired.map((o) => o.at.getTime())));
    expect(Math.min(...fired.map((o) => o.at.getTime()))).toBeGreaterThan(resumedAt - 1000);
    const history = await admin.getScheduleHistory('op', { namespace: ns });
    expect(history.map((h) => [h.revision, h.change, h.actor, h.jobId])).toEqual([
      [4, 'paused', null, null],
      [3, 'resumed', null, null],
      [2, 'triggered', 'ops', triggered],
      [2, 'paused', 'ops', null],
      [1, 'created', null, null],
    ]);
  });

  it('refuses actions on unknown and disabled schedules with typed errors', async () => {
    await expect(admin.pauseSchedule('nope')).rejects.toBeInstanceOf(ScheduleNotFoundError);
    await expect(admin.triggerSchedule('nope', { namespace: 'elsewhere' })).rejects.toThrow('no schedule "nope" in namespace "elsewhere"');
    await expect(admin.getScheduleHistory('nope')).rejects.toBeInstanceOf(ScheduleNotFoundError);
    await queue.syncSchedules('gone', [{ key: 'old', type: 'x', cron: '@daily' }]);
    await queue.syncSchedules('gone', []);
    await expect(admin.triggerSchedule('old', { namespace: 'gone' })).rejects.toThrow(/is disabled/);
    await expect(admin.pauseSchedule('old', { namespace: 'gone', actor: 'x'.repeat(201) })).rejects.toMatchObject({ field: 'actor' });
  });
});

describe('catch-up after an outage', () => {
  // A 1 s schedule whose occurrences count as missed after 1 s: no tick runs for a few seconds
  // (no worker), then one tick decides. The most recent due occurrence is on time (within its
  // second); older ones were missed.
  async function afterShortOutage(key: string, catchUp: ScheduleDefinition['catchUp'], catchUpLimit?: number) {
    await queue.syncSchedules('catch-up', [everySecond(key, `catch.${key}`, { catchUp, catchUpLimit, missedAfterMs: 1000 })]);
    const [{ nextRunAt }] = (await admin.listSchedules({ namespace: 'catch-up' })).filter((s) => s.key === key);
    await waitFor(async () => {
      const { rows } = await pool.query<{ due: boolean }>('SELECT clock_timestamp() > $1::timestamptz + interval \'4.5 seconds\' AS due', [nextRunAt]);
      return rows[0].due;
    }, 20_000, 'an outage of four seconds');
    await runTick(pool);
    return decidedOccurrencesOf(pool, key, 'catch-up');
  }

  it('skip (default): fires only the occurrence still on time', async () => {
    const decided = await afterShortOutage('short-skip', undefined);
    expect(decided.length).toBeGreaterThanOrEqual(5);
    expect(decided.map((o) => o.state)).toEqual([...decided.slice(1).map(() => 'skipped'), 'fired']);
    expect(decided.slice(0, -1).every((o) => o.reason === 'missed')).toBe(true);
  });

  it('latest: fires the most recent missed occurrence besides the one on time', async () => {
    const decided = await afterShortOutage('short-latest', 'latest');
    expect(decided.map((o) => o.state)).toEqual([...decided.slice(2).map(() => 'skipped'), 'fired', 'fired']);
  });

  it('all: fires the most recent catchUpLimit missed occurrences, and skips older ones', async () => {
    const decided = await afterShortOutage('short-all', 'all', 2);
    expect(decided.map((o) => o.state)).toEqual([...decided.slice(3).map(() => 'skipped'), 'fired', 'fired', 'fired']);
    expect((await scheduledJobsOf(pool, 'catch.short-all')).length).toBe(3);
  });

  // An outage longer than the plan: the plan ended ten minutes ago, and a minutely schedule's
  // missed occurrences were never planned. The TypeScript tick plans what the mode wants and the
  // next tick fires it.
  it.each([
    { catchUp: 'skip', limit: undefined, expected: 0 },
    { catchUp: 'latest', limit: undefined, expected: 1 },
    { catchUp: 'all', limit: 3, expected: 3 },
  ] as const)('past the plan, $catchUp fires the $expected most recent missed minutes', async ({ catchUp, limit, expected }) => {
    const key = `long-${catchUp}`;
    const type = `catch.${key}`;
    await queue.syncSchedules('catch-up', [{ key, type, cron: '* * * * *', catchUp, catchUpLimit: limit, missedAfterMs: 1000 }]);
    await simulateOutage(pool, key, 10 * 60_000, 'catch-up');
    await runTick(pool); // plans
    await runTick(pool); // fires
    const jobs = await scheduledJobsOf(pool, type);
    const now = Date.now();
    // Within the last second the current minute may have begun on time: leave it out.
    const missedJobs = jobs.filter((j) => now - new Date(j.occurrence ?? '').getTime() > 2000);
    expect(missedJobs.length).toBe(expected);
    const minutes = missedJobs.map((j) => new Date(j.occurrence ?? '').getTime());
    const latestMinute = Math.floor((now - 2000) / 60_000) * 60_000;
    expect(minutes).toEqual(Array.from({ length: expected }, (_, i) => latestMinute - (expected - 1 - i) * 60_000));
    // Nothing more on later ticks.
    await runTick(pool);
    expect((await scheduledJobsOf(pool, type)).filter((j) => now - new Date(j.occurrence ?? '').getTime() > 2000).length).toBe(expected);
  });
});

describe('a definition changed while workers run', () => {
  it('fires the new cron and payload from the change on, and never an occurrence twice', async () => {
    const ns = 'changing';
    const type = 'change.job';
    await queue.syncSchedules(ns, [everySecond('c', type, { payload: { v: 1 }, options: { queue: 'change-q' } })]);
    startWorker([type], { queues: ['change-q'] });
    startWorker([type], { queues: ['change-q'] });
    await waitFor(async () => (await decidedOccurrencesOf(pool, 'c', ns)).length >= 3, 20_000, 'three fires of revision 1');
    const changed = await queue.syncSchedules(ns, [{ key: 'c', type, cron: '*/2 * * * * *', payload: { v: 2 }, options: { queue: 'change-q' } }]);
    expect(changed).toEqual([{ key: 'c', change: 'updated', revision: 2 }]);
    await waitFor(
      async () => (await decidedOccurrencesOf(pool, 'c', ns)).filter((o) => o.revision === 2).length >= 3,
      20_000,
      'three fires of revision 2',
    );
    await queue.syncSchedules(ns, []);
    const occurrences = await decidedOccurrencesOf(pool, 'c', ns);
    expect(occurrences.every((o) => o.state === 'fired')).toBe(true);
    const jobs = await scheduledJobsOf(pool, type);
    expect(jobs.length).toBe(occurrences.length);
    const byJob = new Map(jobs.map((j) => [j.id, j.payload]));
    const revision2 = occurrences.filter((o) => o.revision === 2);
    expect(revision2.every((o) => o.at.getUTCSeconds() % 2 === 0)).toBe(true);
    expect(revision2.every((o) => (byJob.get(o.job_id ?? '') as { v: number }).v === 2)).toBe(true);
    expect(occurrences.filter((o) => o.revision === 1).every((o) => (byJob.get(o.job_id ?? '') as { v: number }).v === 1)).toBe(true);
    // One row per occurrence time is the barrier: no time twice.
    const times = occurrences.map((o) => o.at.getTime());
    expect(new Set(times).size).toBe(times.length);
    expect((await admin.getScheduleHistory('c', { namespace: ns })).map((h) => h.change)).toEqual(['disabled', 'updated', 'created']);
  });
});

it('plans at the sync: a plan holds the occurrences of the next minute, and the tick plans on from its last', async () => {
  await queue.syncSchedules('planning', [everySecond('p', 'plan.job')]);
  const planned = (await occurrencesOf(pool, 'p', 'planning')).filter((o) => o.state === 'planned');
  expect(planned.length).toBeGreaterThanOrEqual(59);
  expect(planned.length).toBeLessThanOrEqual(61);
  const { rows } = await pool.query<{ replan_at: Date }>(`SELECT replan_at FROM workhorse.schedule WHERE namespace = 'planning' AND key = 'p'`);
  expect(rows[0].replan_at.getTime()).toBe(planned[planned.length - 1].at.getTime());
  await queue.syncSchedules('planning', []);
  expect(await occurrencesOf(pool, 'p', 'planning')).toEqual([]);
});
