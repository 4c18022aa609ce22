import type { ClaimedJob } from './claimed-job';
import { WorkhorseValidationError } from './errors';
import { fromPgError } from './protocol/errors';
import { RUN_CHILDREN } from './protocol/handler';
import { JobTracing } from './telemetry/job-tracing';
import type { ChildJobSpec, ChildOutcome, JsonValue, Queryable } from './types';
import { renamedRequestError, toRequestJson } from './validation';

/** One row of `run_children_v1`'s answer: the call's status, and per child its outcome once settled. */
export interface ChildRow {
  status: 'parked' | 'settled' | 'canceled' | 'stale';
  child_id: string | null;
  state: 'succeeded' | 'failed' | 'canceled' | null;
  result: JsonValue | null;
  error: ChildOutcome['error'];
}

const SPEC_KEYS = ['type', 'payload', 'options'];

/**
 * The children of a `ctx.runChildren` call as the protocol's JSON request texts, checked (each
 * gets the trace context of the call's PRODUCER span in {@link startChildren}).
 */
export function childRequestsJson(children: readonly ChildJobSpec[]): string[] {
  if (!Array.isArray(children) || children.length < 1 || children.length > 1000) {
    throw new WorkhorseValidationError('children', 'must be an array of 1 to 1000 child job specs');
  }
  const requests = children.map((spec: ChildJobSpec, i) => {
    if (typeof spec !== 'object' || spec === null) throw new WorkhorseValidationError(`children[${i}]`, 'must be an object with type and payload');
    for (const key of Object.keys(spec)) if (!SPEC_KEYS.includes(key)) throw new WorkhorseValidationError(`children[${i}].${key}`, `is not a child job field (${SPEC_KEYS.join(', ')})`);
    // Dependency options on a child are refused by run_children_v1 (check_child_requests), the rule's one place.
    return toRequestJson(spec.type, spec.payload, spec.options, `children[${i}].`);
  });
  return requests;
}

/**
 * Starts the children under `key` (or finds those a replay started) and parks the job, fenced
 * (`run_children_v1`). Under the handler's span (with an OpenTelemetry SDK) this is a PRODUCER
 * span like an enqueue's, and the children store its trace context.
 */
export async function startChildren(
  runner: Queryable,
  job: ClaimedJob,
  key: string,
  children: readonly ChildJobSpec[],
  requests: readonly string[],
): Promise<ChildRow[]> {
  const span = JobTracing.active()?.startEnqueue(children.map((child) => ({ type: child.type, queue: child.options?.queue }))) ?? null;
  try {
    const result = await runner.query(RUN_CHILDREN, [
      job.jobId,
      job.workerId,
      job.fenceToken,
      key,
      `[${(span ? requests.map((request) => span.carry(request)) : requests).join(',')}]`,
    ]);
    const rows = result.rows as ChildRow[];
    span?.sent(rows.flatMap((row) => (row.child_id === null ? [] : [row.child_id])));
    return rows;
  } catch (error) {
    // enqueue_many_v1's names (`requests[2].priority`) as the caller gave them (`children[2].priority`).
    const typed = renamedRequestError(fromPgError(error), (i) => `children[${i}]`);
    span?.failed(typed);
    throw typed;
  }
}
