import type { JobLineage, JobLink, JobState } from './types';

/** A row of `workhorse.job_links_v1`. */
export interface LinkRow {
  relation: 'dependency' | 'parent' | 'child';
  job_id: string;
  state: JobState;
  key: string | null;
}

const LIVE: ReadonlySet<JobState> = new Set(['blocked', 'scheduled', 'ready', 'active']);

/**
 * What `admin.getJob` reports of a job's links: its prerequisites, its parent and children, and
 * while it is `blocked`, which of its prerequisites or (latest) children have not ended.
 */
export function toLineage(rows: LinkRow[], state: JobState): JobLineage {
  const dependencies: JobLink[] = [];
  const children: (JobLink & { key: string })[] = [];
  let parentId: string | null = null;
  for (const row of rows) {
    if (row.relation === 'dependency') dependencies.push({ id: row.job_id, state: row.state });
    else if (row.relation === 'parent') parentId = row.job_id;
    else children.push({ id: row.job_id, state: row.state, key: row.key as string });
  }
  const waitingOn = state === 'blocked' ? [...dependencies, ...children].filter((link) => LIVE.has(link.state)).map(({ id, state: s }) => ({ id, state: s })) : [];
  return { dependencies, waitingOn, parentId, children };
}
