import { WorkhorseValidationError } from '../errors';
import { fromPgError } from '../protocol-errors';
import type { Queryable } from '../types';
import { compileCron } from './cron';

/** How many occurrences one plan holds ahead of now, at most (and how far ahead: 400 days). */
export const PLAN_SIZE = 100;
const PLAN_HORIZON_MS = 400 * 86_400_000;
/** A schedule whose expression this client cannot evaluate is asked about again this much later. */
const UNPLANNABLE_RETRY_MS = 3_600_000;

/** One row of schedules_to_plan_v1: a schedule whose plan runs short. */
export interface ScheduleToPlan {
  schedule_id: string;
  revision: number;
  cron: string;
  timezone: string;
  catch_up: 'skip' | 'latest' | 'all';
  catch_up_limit: number;
  missed_after_ms: number;
  /** The plan continues after this time. */
  planned_through: Date;
  /** The database's clock when the row was read: plans follow it, not this process's clock. */
  db_now: Date;
}

/** The occurrences to add to a plan, ascending, and when to ask for more (null: never). */
export interface PlanExtension {
  occurrences: Date[];
  replanAt: Date | null;
}

/**
 * The next part of one schedule's plan: its occurrences after `planned_through`, up to
 * {@link PLAN_SIZE} within 400 days of now (at least the next one), and the time to top it up
 * again (once half of them have passed).
 *
 * After an outage the plan may end before now minus `missed_after_ms`: the occurrences of that
 * gap were missed. For catch-up `skip` none of them is planned; for `latest` the most recent, for
 * `all` the most recent `catch_up_limit`, so that the tick can fire them (it fires missed
 * occurrences only once the plan reaches past now, so that it decides on all of them at once).
 */
export function extendPlan(row: ScheduleToPlan, key = `schedule ${row.schedule_id}`): PlanExtension {
  const cron = compileCron(key, row.cron, row.timezone);
  const now = row.db_now.getTime();
  const cursor = row.planned_through.getTime();
  const boundary = now - row.missed_after_ms;
  const missed: Date[] = [];
  let start = cursor;
  if (cursor < boundary) {
    if (row.catch_up !== 'skip') {
      const count = row.catch_up === 'latest' ? 1 : row.catch_up_limit;
      // previousRuns counts a run in the reference's own second: one millisecond past the
      // boundary includes a run exactly at it, which nextRuns below (strictly after) leaves out.
      for (const at of cron.previousRuns(count, new Date(boundary + 1))) {
        if (at.getTime() > cursor && at.getTime() <= boundary) missed.unshift(at);
      }
    }
    start = boundary;
  }
  const future = cron.nextRuns(PLAN_SIZE, new Date(start)).filter((at, i) => i === 0 || at.getTime() <= now + PLAN_HORIZON_MS);
  return {
    occurrences: [...missed, ...future],
    replanAt: future.length === 0 ? null : future[Math.floor(future.length / 2)],
  };
}

/**
 * Tops up the plans that run short (all of them, or one namespace's): reads them with
 * schedules_to_plan_v1, computes each with {@link extendPlan}, and writes it with
 * plan_schedule_v1, which keeps only the first of concurrent planners. Returns how many plans
 * were extended. Workers call it from their tick when the tick says `schedulesToPlan`;
 * `queue.syncSchedules` calls it right after a sync.
 */
export async function planSchedules(db: Queryable, namespace: string | null = null): Promise<number> {
  let planned = 0;
  // Bounded: a tick plans at most 10 rounds of 100 schedules; the rest is asked for again.
  for (let round = 0; round < 10; round++) {
    const rows = await query<ScheduleToPlan>(db, 'SELECT * FROM workhorse.schedules_to_plan_v1($1, $2)', [100, namespace]);
    for (const row of rows) {
      let extension: PlanExtension;
      try {
        extension = extendPlan(row);
      } catch (error) {
        if (!(error instanceof WorkhorseValidationError)) throw error;
        // Synced by a client whose cron library reads it differently: nothing to plan here.
        extension = { occurrences: [], replanAt: new Date(row.db_now.getTime() + UNPLANNABLE_RETRY_MS) };
      }
      const [answer] = await query<{ status: string }>(
        db,
        'SELECT workhorse.plan_schedule_v1($1, $2, $3, $4::timestamptz[], $5) AS status',
        [row.schedule_id, row.revision, row.planned_through, extension.occurrences, extension.replanAt],
      );
      if (answer.status === 'planned') planned++;
    }
    if (rows.length < 100) break;
  }
  return planned;
}

async function query<R>(db: Queryable, text: string, values: unknown[]): Promise<R[]> {
  try {
    return (await db.query(text, values)).rows as R[];
  } catch (error) {
    throw fromPgError(error);
  }
}
