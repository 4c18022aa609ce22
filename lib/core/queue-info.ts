import type { QueueInfo } from './types';

/** A row of `list_queues_v2`. */
export interface QueueRow {
  queue: string;
  paused: boolean;
  changed_at: Date | null;
  changed_by: string | null;
  login_role: string | null;
  reason: string | null;
  ready: string;
  scheduled: string;
  active: string;
  blocked: string;
  concurrency: number | null;
  rate_limit: number | null;
  rate_interval_ms: number | null;
  policy_changed_at: Date | null;
  policy_changed_by: string | null;
  policy_login_role: string | null;
  policy_reason: string | null;
  per_key_concurrency: number | null;
}

export const toQueueInfo = (row: QueueRow): QueueInfo => ({
  queue: row.queue,
  paused: row.paused,
  changedAt: row.changed_at,
  changedBy: row.changed_by,
  loginRole: row.login_role,
  reason: row.reason,
  ready: Number(row.ready),
  scheduled: Number(row.scheduled),
  active: Number(row.active),
  blocked: Number(row.blocked),
  concurrency: row.concurrency,
  rateLimit: row.rate_limit === null ? null : { limit: row.rate_limit, intervalMs: row.rate_interval_ms ?? 0 },
  perKey: row.per_key_concurrency === null ? null : { concurrency: row.per_key_concurrency },
  policyChangedAt: row.policy_changed_at,
  policyChangedBy: row.policy_changed_by,
  policyLoginRole: row.policy_login_role,
  policyReason: row.policy_reason,
});


/** A queue that nothing is recorded for: running, empty, unlimited. */
export const idleQueueInfo = (queue: string): QueueInfo => ({
  queue, paused: false, changedAt: null, changedBy: null, loginRole: null, reason: null,
  ready: 0, scheduled: 0, active: 0, blocked: 0, concurrency: null, rateLimit: null, perKey: null,
  policyChangedAt: null, policyChangedBy: null, policyLoginRole: null, policyReason: null,
});

/** A queue's limits in words: `at most 5 active, 50 per 1000 ms`; null for none. */
export function describeLimits(queue: Pick<QueueInfo, 'concurrency' | 'rateLimit'> & { perKey?: QueueInfo['perKey'] }): string | null {
  const parts = [
    queue.concurrency === null ? null : `at most ${queue.concurrency} active`,
    queue.rateLimit === null ? null : `${queue.rateLimit.limit} per ${queue.rateLimit.intervalMs} ms`,
    queue.perKey === undefined || queue.perKey === null ? null : `at most ${queue.perKey.concurrency} active per key`,
  ].filter((part) => part !== null);
  return parts.length === 0 ? null : parts.join(', ');
}
