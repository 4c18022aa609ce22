import type { Meter, ObservableResult } from '@opentelemetry/api';
import type { Pool } from 'pg';
import { QUEUE_DEPTHS, QUEUE_DEPTHS_OF } from '../protocol/admin';

const STATES = ['ready', 'scheduled', 'active', 'blocked'] as const;

type DepthRow = Record<(typeof STATES)[number], number> & { queue: string };

/**
 * `workhorse.queue.depth`: an observable gauge of the live jobs by `queue` and `state`, read
 * (`list_queues_v2`, one statement) only when the SDK collects, never per job: of `queues` (a
 * worker's own), and with `all` of every queue the database lists too (also a queue no worker
 * serves, the stuck queue's case). Each process reads the same database, so two processes that report a queue report the
 * same numbers (combine them with a max, not a sum; see docs/operations.md#metrics). Returns the
 * function that stops observing. A failed read (e.g. a role without the operator capability,
 * which `list_queues_v2` needs) is left to the SDK (it logs it); the next collection tries again.
 */
export function observeQueueDepth(meter: Meter, pool: Pool, queues: readonly string[], all: boolean): () => void {
  const gauge = meter.createObservableGauge('workhorse.queue.depth', { description: 'Live jobs by queue and state.', unit: '{job}' });
  // Queues to report 0 for when the database does not list them: one that emptied is empty, not
  // unknown (the own queues, and with `all` those seen in earlier collections).
  const known = new Set<string>(queues);
  const callback = async (result: ObservableResult): Promise<void> => {
    const { rows } =
      all
        ? await pool.query<DepthRow>(QUEUE_DEPTHS)
        : await pool.query<DepthRow>(QUEUE_DEPTHS_OF, [queues]);
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.queue);
      for (const state of STATES) result.observe(Number(row[state]), { queue: row.queue, state });
    }
    // A queue without live jobs (nor a pause or policy) is not listed: it is empty, not unknown.
    for (const queue of known) if (!seen.has(queue)) for (const state of STATES) result.observe(0, { queue, state });
    if (all) for (const queue of seen) known.add(queue);
  };
  gauge.addCallback(callback);
  return () => gauge.removeCallback(callback);
}
