import type { Meter, ObservableResult } from '@opentelemetry/api';
import type { Pool } from 'pg';

const STATES = ['ready', 'scheduled', 'active', 'blocked'] as const;

/**
 * `workhorse.queue.depth`: an observable gauge of the live jobs of `queues` by `state`, read
 * (`list_queues_v1`, one statement) only when the SDK collects, never per job. Returns the
 * function that stops observing. A failed read is left to the SDK (it logs it); the next
 * collection tries again.
 */
export function observeQueueDepth(meter: Meter, pool: Pool, queues: readonly string[]): () => void {
  const gauge = meter.createObservableGauge('workhorse.queue.depth', { description: 'Live jobs by queue and state.', unit: '{job}' });
  const callback = async (result: ObservableResult): Promise<void> => {
    const { rows } = await pool.query<Record<(typeof STATES)[number], number> & { queue: string }>(
      'SELECT queue, ready, scheduled, active, blocked FROM workhorse.list_queues_v1() WHERE queue = ANY ($1)',
      [queues],
    );
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.queue);
      for (const state of STATES) result.observe(Number(row[state]), { queue: row.queue, state });
    }
    // A queue without live jobs is not listed: it is empty, not unknown.
    for (const queue of queues) if (!seen.has(queue)) for (const state of STATES) result.observe(0, { queue, state });
  };
  gauge.addCallback(callback);
  return () => gauge.removeCallback(callback);
}
