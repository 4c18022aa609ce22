import type { JsonValue, TimelineEntry } from './types';

/** A row of `get_timeline_v3`: an entry, or the last row that only carries `next_cursor`. */
export interface TimelineRow {
  id: string;
  at: Date;
  source: 'event' | 'attempt';
  kind: string;
  attempt: number | null;
  worker_id: string | null;
  fence_token: string | null;
  data: { [key: string]: JsonValue } | null;
  login_role: string | null;
  next_cursor: string | null;
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
    loginRole: row.login_role,
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
