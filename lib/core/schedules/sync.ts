import { fromPgError } from '../protocol-errors';
import type { Queryable } from '../types';
import { toWireSchedules } from './definition';
import { planSchedules } from './planner';
import type { ScheduleDefinition, SyncedSchedule } from './types';

/**
 * Makes `definitions` the desired state of `namespace` (see `Queue.syncSchedules`): checks them
 * all (typed errors, nothing written), applies them with sync_schedules_v1 (one transaction under
 * the namespace's lock), then plans the schedules that need it, on the same connection.
 */
export async function syncSchedules(db: Queryable, namespace: string, definitions: readonly ScheduleDefinition[]): Promise<SyncedSchedule[]> {
  const wire = toWireSchedules(namespace, definitions);
  let rows: SyncedSchedule[];
  try {
    const result = await db.query('SELECT key, change, revision FROM workhorse.sync_schedules_v1($1, $2::jsonb)', [
      namespace,
      JSON.stringify(wire),
    ]);
    rows = result.rows as SyncedSchedule[];
  } catch (error) {
    throw fromPgError(error);
  }
  await planSchedules(db, namespace);
  return rows;
}
