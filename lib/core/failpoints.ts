/**
 * Test failpoints: `WORKHORSE_FAILPOINTS="after-claim:0.01,before-complete:0.05"` makes the
 * process kill itself (SIGKILL, no cleanup) with the given probability each time it passes that
 * point, so crash tests can stop a worker at every boundary of a job. Read once at load: without
 * the variable every call is one null check.
 *
 * Points: `after-claim` (rows claimed, no handler started), `before-handler`, `after-handler`
 * (handler returned, nothing recorded), `before-complete` (completion about to be sent),
 * `after-complete` (completion committed, answer not yet used), `before-wait` (a signal or human
 * wait about to be sent), `after-wait` (its answer committed, e.g. the job parked, not yet used),
 * `before-park` (child jobs about to be started and the job parked), `after-park` (parked, the
 * worker not yet told), `after-schedule-fire` (a maintenance tick enqueued the jobs of due
 * schedule occurrences, not yet committed).
 */
export type FailpointName =
  | 'after-claim'
  | 'before-handler'
  | 'after-handler'
  | 'before-complete'
  | 'after-complete'
  | 'before-wait'
  | 'after-wait'
  | 'before-park'
  | 'after-park'
  | 'after-schedule-fire';

function parse(spec: string | undefined): Map<string, number> | null {
  if (!spec) return null;
  const points = new Map<string, number>();
  for (const part of spec.split(',')) {
    const [name, probability] = part.trim().split(':');
    if (name) points.set(name, probability === undefined ? 1 : Number(probability));
  }
  return points;
}

const active = parse(process.env.WORKHORSE_FAILPOINTS);

export function failpoint(name: FailpointName | (string & {})): void {
  if (active === null) return;
  const probability = active.get(name);
  if (probability !== undefined && Math.random() < probability) process.kill(process.pid, 'SIGKILL');
}
