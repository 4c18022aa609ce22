/**
 * The heartbeater answers each lease it sent. A job whose attempt ends while a heartbeat round is
 * in flight, and which the same worker claims again at once (a retry with no delay), has a new
 * lease under the same job id by the time the round's answer arrives: a `stale` for the old lease
 * must not mark the new one lost (it did: the answer was looked up by job id, the new attempt's
 * handler lost its lease and the job ran a third time after the lease expired).
 *
 * The round is made slow and `stale` on purpose: in a database of its own, heartbeat_many_v1 is
 * replaced by a function that sleeps, then answers `stale` for every lease.
 */
import { Heartbeater, type HeldLease } from '../../lib/core/worker/heartbeater';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { db } = useTestDatabase({ checkInvariants: false });

beforeAll(async () => {
  await db.pool.query(`
    CREATE OR REPLACE FUNCTION workhorse.heartbeat_many_v1(p_worker_id text, p_leases jsonb, p_lease_ms integer)
    RETURNS TABLE (job_id uuid, status text, lease_expires_at timestamptz)
    LANGUAGE sql AS $$
      SELECT (l ->> 'jobId')::uuid, 'stale', NULL::timestamptz
      FROM pg_sleep(0.3), jsonb_array_elements(p_leases) AS l
    $$`);
});

it('applies an answer to the lease it was sent for, not to a newer lease of the same job', async () => {
  const jobId = '0190a000-0000-7000-8000-000000000001';
  const first: HeldLease = { job: { jobId, fenceToken: '1001' }, deadline: Date.now() + 60_000, renewing: true };
  const second: HeldLease = { job: { jobId, fenceToken: '2001' }, deadline: Date.now() + 60_000, renewing: true };
  const leases = new Map<string, HeldLease>([[jobId, first]]);
  const lost: string[] = [];
  const errors: Error[] = [];
  const heartbeater = new Heartbeater(db.pool, 'w-1', 60_000, 50, (e) => errors.push(e), { lost: (id) => lost.push(id), cancelRequested: () => undefined }, leases);
  heartbeater.start();
  try {
    await waitFor(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%heartbeat_many_v1%' AND pid <> pg_backend_pid()",
        );
        return rows[0].n > 0;
      },
      10_000,
      'a heartbeat round in flight',
    );
    // The first attempt ends and the job is claimed again while the round is in flight.
    first.renewing = false;
    leases.set(jobId, second);
  } finally {
    // Stops the timer and waits for the round in flight to answer; no further round is sent.
    await heartbeater.stop();
  }
  expect(errors).toEqual([]);
  expect(lost).toEqual([]);
  expect(second.renewing).toBe(true);
});
