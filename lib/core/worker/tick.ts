import type { Pool, QueryResult } from 'pg';
import { CheckedOutClient } from '../checked-out-client';
import { failpoint } from '../failpoints';
import { COMMIT, ROLLBACK } from '../protocol/session';
import { BEGIN_TICK } from '../protocol/worker';

/** What tick_v1 answers (sql/050_maintenance.sql); a skipped tick carries `skipped` and `schedulesToPlan` only. */
export interface TickResult {
  skipped: boolean;
  promoted?: number;
  recovered?: number;
  deadlinesExpired?: number;
  partitionsCreated?: number;
  /** Schedules whose occurrences the tick planned (the server plans every schedule). */
  schedulesPlanned?: number;
  schedulesFired?: number;
  /** For the previous release's workers, which planned themselves: more schedules were due for planning than one tick plans. */
  schedulesToPlan: boolean;
  /** Some part of the tick stopped at its bound: tick again at once. */
  more?: boolean;
}

/**
 * One maintenance tick of a TypeScript worker: tick_v1 (promotion, recovery, deadlines, schedule
 * occurrences planned and fired, partitions), the same call every SDK's worker makes.
 *
 * The tick runs in an explicit transaction so that a process killed after its work and before
 * its commit (failpoint `after-schedule-fire`, armed only when the tick fired an occurrence)
 * leaves nothing behind: the database rolls the whole tick back, and another worker's tick fires
 * the same occurrences. BEGIN and the tick travel in one round trip.
 */
export async function runTick(pool: Pool): Promise<TickResult> {
  // Listened to while checked out: a killed backend fails the tick (through its query), not the process.
  const checkedOut = await CheckedOutClient.take(pool);
  const { client } = checkedOut;
  let result: TickResult;
  let failure: Error | undefined;
  try {
    const answers = (await client.query(BEGIN_TICK)) as unknown as QueryResult<{ tick: TickResult }>[];
    result = answers[1].rows[0].tick;
    if ((result.schedulesFired ?? 0) > 0) failpoint('after-schedule-fire');
    await client.query(COMMIT);
  } catch (error) {
    failure = error as Error;
    await client.query(ROLLBACK).catch(() => undefined);
    throw error;
  } finally {
    // A connection that failed mid-tick is not given back to the pool.
    checkedOut.release(failure);
  }
  return result;
}
