import type { Admin } from '../core/admin';
import type { JobSnapshot, ListJobsFilter } from '../core/types';

/** Pages through `admin.listJobs`, newest job first. */
export async function* jobsNewestFirst(admin: Admin, filter: Omit<ListJobsFilter, 'limit' | 'cursor'>): AsyncGenerator<JobSnapshot> {
  let cursor: string | undefined;
  do {
    const page = await admin.listJobs({ ...filter, limit: 1000, cursor });
    yield* page.items;
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
}

/**
 * Jobs that a worker would run now (ready, active, or scheduled and due) in these queues, or in
 * every queue for `null`.
 */
export async function dueJobs(admin: Admin, queues: readonly string[] | null): Promise<JobSnapshot[]> {
  const now = Date.now();
  const due: JobSnapshot[] = [];
  for (const queue of queues ? new Set(queues) : [undefined]) {
    for await (const job of jobsNewestFirst(admin, { queue, states: ['ready', 'active', 'scheduled'] })) {
      if (job.state !== 'scheduled' || job.runAt.getTime() <= now) due.push(job);
    }
  }
  return due;
}
