import { InvalidCronError, UnknownTimeZoneError, WorkhorseValidationError } from '../errors';
import { fromPgError } from '../protocol/errors';
import { SYNC_SCHEDULES } from '../protocol/producer';
import type { Queryable } from '../types';
import { toWireSchedules, type WireScheduleDefinition } from './definition';
import type { ScheduleDefinition, SyncedSchedule } from './types';

/**
 * Makes `definitions` the desired state of `namespace` (see `Queue.syncSchedules`): checks their
 * shape (typed errors, nothing written), then applies them with sync_schedules_v1, which reads
 * each cron expression and time zone (sql/084_cron.sql), plans the new and re-timed schedules
 * and writes everything in one transaction under the namespace's lock.
 */
export async function syncSchedules(db: Queryable, namespace: string, definitions: readonly ScheduleDefinition[]): Promise<SyncedSchedule[]> {
  const wire = toWireSchedules(namespace, definitions);
  try {
    const result = await db.query(SYNC_SCHEDULES, [
      namespace,
      JSON.stringify(wire),
    ]);
    return result.rows as SyncedSchedule[];
  } catch (error) {
    const mapped: unknown = fromPgError(error);
    throw mapped instanceof Error ? scheduleError(mapped, wire) : mapped;
  }
}

/** The server's refusal of a definition's cron expression or zone, as the typed error naming the schedule. */
function scheduleError(error: Error, wire: readonly WireScheduleDefinition[]): Error {
  if (!(error instanceof WorkhorseValidationError)) return error;
  const match = /^definitions\[(\d+)\]\.(cron|timezone)$/.exec(error.field);
  const definition = match ? wire[Number(match[1])] : undefined;
  if (!match || !definition) return error;
  if (match[2] === 'timezone') return new UnknownTimeZoneError(definition.key, definition.timezone ?? 'UTC');
  const detail = error.message.startsWith(`${error.field}: `) ? error.message.slice(error.field.length + 2) : error.message;
  return new InvalidCronError(definition.key, definition.cron, detail);
}

/**
 * @deprecated The server plans every schedule on its tick (and at a sync); this does nothing and
 * returns 0. Kept so that code of the previous release still compiles.
 */
export async function planSchedules(_db?: Queryable, _namespace?: string | null): Promise<number> {
  return 0;
}
