import { call } from '../protocol/call';
import { LIST_OPERATOR_CHANGES } from '../protocol/admin';
import type { Queryable } from '../types';
import { WorkhorseValidationError } from '../errors';

/** What an operator changed (`admin.listOperatorChanges()`). */
export type OperatorChangeKind = 'queue_paused' | 'queue_resumed' | 'queue_policy_set' | 'worker_drain_requested' | 'retention_set';

/**
 * One operator change of a setting that is kept in place (a queue's pause state or policy, a
 * drain request, the retention policy), as recorded when it was made: the caller-chosen `actor`
 * and `reason`, and the login role (`session_user`) of the session that made it.
 */
export interface OperatorChange {
  id: string;
  at: Date;
  kind: OperatorChangeKind;
  /** The queue or worker id it is about; null for the retention policy. */
  subject: string | null;
  actor: string | null;
  reason: string | null;
  loginRole: string;
  /** What was set: the queue policy now in force, or the retention settings given; null otherwise. */
  detail: unknown;
}

/** Filters and paging of {@link listOperatorChanges}: newest first, `limit` (default 100, 1..1000) rows with ids below `beforeId`. */
export interface OperatorChangeFilter {
  kind?: OperatorChangeKind;
  subject?: string;
  limit?: number;
  beforeId?: string;
}

interface Row {
  id: string;
  at: Date;
  kind: OperatorChangeKind;
  subject: string | null;
  actor: string | null;
  reason: string | null;
  login_role: string;
  detail: unknown;
}

/** `list_operator_changes_v1`; the filter's keys were checked by the caller. */
export async function listOperatorChanges(db: Queryable, filter: OperatorChangeFilter): Promise<OperatorChange[]> {
  // The kinds and ranges are checked by SQL (typed errors naming the field); here only what the
  // wire cannot carry as given: a kind or subject that is not a string, a limit that is not an
  // integer, an id that is not a decimal string.
  for (const field of ['kind', 'subject'] as const) {
    if (filter[field] !== undefined && typeof filter[field] !== 'string') throw new WorkhorseValidationError(field, 'must be a string');
  }
  if (filter.limit !== undefined && !Number.isSafeInteger(filter.limit)) throw new WorkhorseValidationError('limit', 'must be an integer from 1 to 1000');
  if (filter.beforeId !== undefined && (typeof filter.beforeId !== 'string' || !/^[0-9]{1,18}$/.test(filter.beforeId))) {
    throw new WorkhorseValidationError('beforeId', 'must be the id of an operator change (a decimal string)');
  }
  const rows = await call<Row>(db, LIST_OPERATOR_CHANGES, [filter.kind ?? null, filter.subject ?? null, filter.limit ?? 100, filter.beforeId ?? null]);
  return rows.map((r) => ({
    id: r.id, at: r.at, kind: r.kind, subject: r.subject, actor: r.actor, reason: r.reason, loginRole: r.login_role, detail: r.detail,
  }));
}
