import type { JobSnapshot } from '../core/types';
import { jobsNewestFirst } from './jobs';
import { adminOf, type WorkhorseTestTarget } from './target';

/**
 * Filter of {@link listEnqueued}; every field is optional.
 *
 * @example
 * const mails = await listEnqueued(app, { type: 'email.send', queue: 'mail', since: testStartedAt });
 */
export interface ListEnqueuedFilter {
  type?: string;
  queue?: string;
  /** Only jobs created at or after this moment (e.g. a `new Date()` taken before the act). */
  since?: Date;
}

/**
 * The jobs enqueued so far (committed ones, plus the current transaction's own when called
 * inside one), oldest first, optionally only of one type or queue and only since a moment. Each
 * is a full snapshot: payload, options and current state. Takes the Nest application, or the
 * core objects (`{ pool }`, `{ queue }` or `{ admin }`).
 *
 * @example
 * const since = new Date();
 * await fetch(`${url}/orders`, { method: 'POST', body: JSON.stringify({ id: 'o-1' }) });
 * const jobs = await listEnqueued(app, { type: 'order.fulfill', since });
 * expect(jobs.map((job) => job.payload)).toEqual([{ id: 'o-1' }]);
 */
export async function listEnqueued(app: WorkhorseTestTarget, filter: ListEnqueuedFilter = {}): Promise<JobSnapshot[]> {
  const admin = adminOf(app);
  const jobs: JobSnapshot[] = [];
  for await (const job of jobsNewestFirst(admin, { type: filter.type, queue: filter.queue })) {
    if (filter.since && job.createdAt < filter.since) break;
    jobs.push(job);
  }
  return jobs.reverse();
}
