import type { JobLineage, JobLink, JobState } from './types';

/** A row of `workhorse.job_links_v1`. */
export interface LinkRow {
  relation: 'dependency' | 'parent' | 'child';
  job_id: string;
  state: JobState;
  key: string | null;
}

const LIVE: ReadonlySet<JobState> = new Set(['blocked', 'scheduled', 'ready', 'active']);

/** The SQL that reads a job's links (one row per prerequisite, parent and child). */
export const JOB_LINKS_SQL = 'SELECT relation, job_id, state, key FROM workhorse.job_links_v1($1)';

/**
 * A page of a parent's children as snapshots, filtered by queue ($2), type ($3), states ($4) and
 * creation time ($5, $6), at most $7, after the cursor $8 (made by the database).
 */
export const CHILDREN_SQL = 'SELECT * FROM workhorse.list_children_v2($1, $2, $3, $4, $5, $6, $7, $8)';

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
