/**
 * What the planner writes into a schedule's plan (extendPlan, the function every TypeScript
 * planner runs): occurrences across daylight-saving changes in real zones (New York and Berlin,
 * spring forward and fall back, fixed times and intervals, as docs/schedules.md documents them),
 * 5 and 6 fields and macros, the plan's size and horizon, and which missed occurrences are
 * planned after an outage longer than the plan, per catch-up mode.
 */
import { extendPlan, PLAN_SIZE, type ScheduleToPlan } from '../../lib/core/schedules/planner';

function row(cron: string, timezone: string, plannedThrough: string, extra: Partial<ScheduleToPlan> = {}): ScheduleToPlan {
  return {
    schedule_id: '1',
    revision: 1,
    cron,
    timezone,
    catch_up: 'skip',
    catch_up_limit: 100,
    missed_after_ms: 60_000,
    planned_through: new Date(plannedThrough),
    db_now: new Date(plannedThrough),
    ...extra,
  };
}

const iso = (dates: Date[], count: number) => dates.slice(0, count).map((d) => d.toISOString());

describe('daylight saving time', () => {
  it('New York, spring forward (2026-03-08, 02:00 -> 03:00): a fixed time in the gap runs at the end of the gap, once', () => {
    const { occurrences } = extendPlan(row('30 2 * * *', 'America/New_York', '2026-03-07T12:00:00Z'));
    expect(iso(occurrences, 3)).toEqual([
      '2026-03-08T07:00:00.000Z', // 03:00 EDT: 02:30 does not exist that night
      '2026-03-09T06:30:00.000Z', // 02:30 EDT
      '2026-03-10T06:30:00.000Z',
    ]);
  });

  it('New York, fall back (2026-11-01, 02:00 -> 01:00): a fixed time that occurs twice runs once, at the first', () => {
    const { occurrences } = extendPlan(row('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z'));
    expect(iso(occurrences, 3)).toEqual([
      '2026-11-01T05:30:00.000Z', // 01:30 EDT; not again at 01:30 EST (06:30Z)
      '2026-11-02T06:30:00.000Z', // 01:30 EST
      '2026-11-03T06:30:00.000Z',
    ]);
  });

  it('Berlin, spring forward (2026-03-29, 02:00 -> 03:00): an hourly schedule skips the hour that does not exist', () => {
    const { occurrences } = extendPlan(row('0 * * * *', 'Europe/Berlin', '2026-03-28T23:30:00Z'));
    const local = occurrences.slice(0, 3).map((d) => new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit' }).format(d));
    expect(iso(occurrences, 3)).toEqual(['2026-03-29T00:00:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-29T02:00:00.000Z']);
    expect(local).toEqual(['01:00', '03:00', '04:00']);
  });

  it('Berlin, fall back (2026-10-25, 03:00 -> 02:00): an hourly schedule runs at both 02:00s', () => {
    const { occurrences } = extendPlan(row('0 * * * *', 'Europe/Berlin', '2026-10-24T23:30:00Z'));
    expect(iso(occurrences, 4)).toEqual([
      '2026-10-25T00:00:00.000Z', // 02:00 CEST
      '2026-10-25T01:00:00.000Z', // 02:00 CET
      '2026-10-25T02:00:00.000Z', // 03:00 CET
      '2026-10-25T03:00:00.000Z',
    ]);
  });

  it('Berlin, a daily 02:30 across both changes of 2026', () => {
    const spring = extendPlan(row('30 2 * * *', 'Europe/Berlin', '2026-03-28T12:00:00Z')).occurrences;
    expect(iso(spring, 2)).toEqual(['2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z']); // 03:00 CEST, then 02:30 CEST
    const autumn = extendPlan(row('30 2 * * *', 'Europe/Berlin', '2026-10-24T12:00:00Z')).occurrences;
    expect(iso(autumn, 2)).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']); // once, at 02:30 CEST
  });
});

describe('expressions', () => {
  it('reads 5 fields (seconds 0), 6 fields (seconds first) and macros', () => {
    expect(iso(extendPlan(row('*/20 * * * * *', 'UTC', '2026-01-01T00:00:00.500Z')).occurrences, 3)).toEqual([
      '2026-01-01T00:00:20.000Z',
      '2026-01-01T00:00:40.000Z',
      '2026-01-01T00:01:00.000Z',
    ]);
    expect(iso(extendPlan(row('15 6 * * 1', 'UTC', '2026-01-01T00:00:00Z')).occurrences, 2)).toEqual([
      '2026-01-05T06:15:00.000Z',
      '2026-01-12T06:15:00.000Z',
    ]);
    expect(iso(extendPlan(row('@daily', 'Asia/Tokyo', '2026-01-01T00:00:00Z')).occurrences, 2)).toEqual([
      '2026-01-01T15:00:00.000Z',
      '2026-01-02T15:00:00.000Z',
    ]);
  });
});

describe('the plan', () => {
  it('holds the next 100 occurrences and asks again when half have passed', () => {
    const { occurrences, replanAt } = extendPlan(row('* * * * *', 'UTC', '2026-01-01T00:00:30Z'));
    expect(occurrences.length).toBe(PLAN_SIZE);
    expect(occurrences[0].toISOString()).toBe('2026-01-01T00:01:00.000Z');
    expect(replanAt?.toISOString()).toBe(occurrences[50].toISOString());
  });

  it('reaches at most 400 days ahead, but always holds the next occurrence', () => {
    const yearly = extendPlan(row('@yearly', 'UTC', '2026-06-01T00:00:00Z')).occurrences;
    expect(iso(yearly, 5)).toEqual(['2027-01-01T00:00:00.000Z']);
    const leap = extendPlan(row('0 0 29 2 *', 'UTC', '2026-06-01T00:00:00Z')).occurrences;
    expect(iso(leap, 5)).toEqual(['2028-02-29T00:00:00.000Z']);
  });

  describe('after an outage longer than the plan (plan ended 10 minutes ago; missed after 60 s)', () => {
    const now = '2026-01-01T12:00:30Z';
    const ended = '2026-01-01T11:50:30Z';
    const planned = (catchUp: 'skip' | 'latest' | 'all', limit = 100) =>
      iso(extendPlan(row('* * * * *', 'UTC', ended, { db_now: new Date(now), catch_up: catchUp, catch_up_limit: limit })).occurrences, 5);

    it('skip: plans from one grace period ago, nothing missed', () => {
      expect(planned('skip')).toEqual(['2026-01-01T12:00:00.000Z', '2026-01-01T12:01:00.000Z', '2026-01-01T12:02:00.000Z', '2026-01-01T12:03:00.000Z', '2026-01-01T12:04:00.000Z']);
    });

    it('latest: the most recent missed occurrence, then on', () => {
      expect(planned('latest')).toEqual(['2026-01-01T11:59:00.000Z', '2026-01-01T12:00:00.000Z', '2026-01-01T12:01:00.000Z', '2026-01-01T12:02:00.000Z', '2026-01-01T12:03:00.000Z']);
    });

    it('all: the most recent catchUpLimit missed occurrences, never before the plan ended', () => {
      expect(planned('all', 3)).toEqual(['2026-01-01T11:57:00.000Z', '2026-01-01T11:58:00.000Z', '2026-01-01T11:59:00.000Z', '2026-01-01T12:00:00.000Z', '2026-01-01T12:01:00.000Z']);
      const all = extendPlan(row('* * * * *', 'UTC', ended, { db_now: new Date(now), catch_up: 'all', catch_up_limit: 1000 })).occurrences;
      expect(all[0].toISOString()).toBe('2026-01-01T11:51:00.000Z');
      expect(all.filter((d) => d.getTime() <= Date.parse(now) - 60_000).length).toBe(9);
    });

    it('an occurrence exactly at the grace boundary is planned once', () => {
      const exact = extendPlan(row('* * * * * *', 'UTC', '2026-01-01T12:00:00Z', { db_now: new Date('2026-01-01T12:02:00Z'), catch_up: 'all', catch_up_limit: 2 })).occurrences;
      // Boundary 12:01:00: missed are 12:00:59 and 12:01:00, then 12:01:01 on.
      expect(iso(exact, 4)).toEqual(['2026-01-01T12:00:59.000Z', '2026-01-01T12:01:00.000Z', '2026-01-01T12:01:01.000Z', '2026-01-01T12:01:02.000Z']);
    });
  });
});
