import { HAS_TIMELINE_V2, TIMELINE, TIMELINE_V1 } from './protocol/admin';
import type { JsonValue, TimelineEntry } from './types';

/** A row of `get_timeline_v2` (or of `get_timeline_v1`, which has no `login_role`). */
export interface TimelineRow {
  id: string;
  at: Date;
  source: 'event' | 'attempt';
  kind: string;
  attempt: number | null;
  worker_id: string | null;
  fence_token: string | null;
  data: { [key: string]: JsonValue } | null;
  login_role?: string | null;
}

/** A page of a job's timeline, with the login role of each event. */
/** The same on a schema that predates get_timeline_v2 (rows without login_role). */
/** Whether the schema has get_timeline_v2: asked until it has (a migration adds it while clients run). */
const withV2 = new WeakSet<object>();

/**
 * The statement that reads a page of the timeline: `get_timeline_v2` once the schema has it
 * (remembered per pool), else `get_timeline_v1`. Asked with a catalog lookup rather than by
 * trying, so a read inside the caller's transaction never fails on an older schema.
 */
export async function timelineSql(pool: object, query: (text: string) => Promise<{ present: boolean }[]>): Promise<string> {
  if (withV2.has(pool)) return TIMELINE;
  const [row] = await query(HAS_TIMELINE_V2);
  if (!row?.present) return TIMELINE_V1;
  withV2.add(pool);
  return TIMELINE;
}

export function toTimelineEntry(row: TimelineRow): TimelineEntry {
  return {
    id: row.id,
    at: row.at,
    source: row.source,
    kind: row.kind,
    attempt: row.attempt,
    workerId: row.worker_id,
    fenceToken: row.fence_token,
    data: row.data,
    loginRole: row.login_role ?? null,
  };
}

/**
 * Events that record a human decision or an operator change (or a signal a caller sent): the
 * CLI and the dashboard show their login role next to the caller-chosen actor.
 */
const ATTRIBUTED_KINDS: ReadonlySet<string> = new Set([
  'human_decided',
  'cancel_requested',
  'canceled',
  'redriven',
  'redriven_from',
  'signal_buffered',
  'signal_delivered',
]);

/** The login role to show beside an entry's details, or null. */
export function shownLoginRole(entry: TimelineEntry): string | null {
  return entry.source === 'event' && entry.loginRole !== null && ATTRIBUTED_KINDS.has(entry.kind) ? entry.loginRole : null;
}
