import type { ClaimedJob } from './context';
import { WorkhorseValidationError } from './errors';
import { fromPgError } from './protocol-errors';
import type { ChildJobSpec, ChildOutcome, JsonValue, Queryable } from './types';
import { toRequestJson } from './validation';

/** One row of `run_children_v1`'s answer: the call's status, and per child its outcome once settled. */
export interface ChildRow {
  status: 'parked' | 'settled' | 'canceled' | 'stale';
  child_id: string | null;
  state: 'succeeded' | 'failed' | 'canceled' | null;
  result: JsonValue | null;
  error: ChildOutcome['error'];
}

/** The children of a `ctx.runChildren` call as the protocol's JSON array of requests, checked. */
export function childRequestsJson(children: readonly ChildJobSpec[]): string {
  if (!Array.isArray(children) || children.length < 1 || children.length > 1000) {
    throw new WorkhorseValidationError('children', 'must be an array of 1 to 1000 child job specs');
  }
  const requests = children.map((spec: ChildJobSpec, i) => {
    if (typeof spec !== 'object' || spec === null) throw new WorkhorseValidationError(`children[${i}]`, 'must be an object with type and payload');
    return toRequestJson(spec.type, spec.payload, spec.options, `children[${i}].`);
  });
  return `[${requests.join(',')}]`;
}

/** Starts the children under `key` (or finds those a replay started) and parks the job, fenced (`run_children_v1`). */
export async function startChildren(runner: Queryable, job: ClaimedJob, key: string, requests: string): Promise<ChildRow[]> {
  try {
    const result = await runner.query('SELECT status, child_id, state, result, error FROM workhorse.run_children_v1($1, $2, $3, $4, $5::jsonb)', [
      job.jobId,
      job.workerId,
      job.fenceToken,
      key,
      requests,
    ]);
    return result.rows as ChildRow[];
  } catch (error) {
    throw fromPgError(error);
  }
}
