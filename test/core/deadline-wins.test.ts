/**
 * A deadline wins over whatever arrives after it. The claim never starts a job past its
 * deadline; in the same way no owner write after the deadline takes effect (a completion does
 * not succeed, a failure does not schedule a retry), even before maintenance has failed the job,
 * and every function that ends such a job ends it as maintenance would: failed with
 * DeadlineExceeded, the open attempt closed as `deadline`.
 */
import { Worker, type WorkerEvent } from '../../lib/core';
import { freshQueue } from '../support/db';
import { claimOne, complete, fail, forceExpire, type ClaimedJob } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { gate, waitFor } from '../support/wait';

const { db, queue, admin } = useTestDatabase();

/** A claimed job whose deadline has just passed, before any maintenance ran. */
async function claimedPastDeadline(options: { executionTimeoutMs?: number } = {}): Promise<ClaimedJob> {
  const q = freshQueue();
  await queue.enqueue('late.job', {}, { queue: q, maxAttempts: 5, deadline: new Date(Date.now() + 3_600_000), ...options });
  const job = await claimOne(db.pool, q, { workerId: 'late-worker' });
  // The deadline passes while the handler runs (moved by hand rather than waited for).
  await db.pool.query("UPDATE workhorse.job_runtime SET deadline = clock_timestamp() - interval '1 second' WHERE job_id = $1", [
    job.jobId,
  ]);
  return job;
}

async function status(sql: string, values: unknown[]): Promise<string> {
  const { rows } = await db.pool.query<{ status: string }>(sql, values);
  return rows[0].status;
}

/** The job failed by its deadline, its one attempt closed as `deadline`. */
async function expectDeadlineFailure(jobId: string): Promise<void> {
  expect(await admin.getJob(jobId)).toMatchObject({ state: 'failed', currentAttempt: 1, result: null, error: { name: 'DeadlineExceeded' } });
  const { rows } = await db.pool.query<{ outcome: string }>('SELECT outcome FROM workhorse.attempt_history WHERE job_id = $1', [jobId]);
  expect(rows.map((r) => r.outcome)).toEqual(['deadline']);
}

describe('a write that arrives after the deadline', () => {
  it('a completion does not succeed (complete_v1, complete_many_v1, complete_and_claim_v1); maintenance then fails the job', async () => {
    for (const send of [
      (job: ClaimedJob) => complete(db.pool, job, { late: true }),
      (job: ClaimedJob) =>
        status('SELECT status FROM workhorse.complete_many_v1($1, $2::jsonb)', [
          job.workerId,
          JSON.stringify([{ jobId: job.jobId, fence: Number(job.fence), result: { late: true } }]),
        ]),
      (job: ClaimedJob) =>
        status('SELECT status FROM workhorse.complete_and_claim_v1($1, $2::jsonb, NULL, 0, NULL)', [
          job.workerId,
          JSON.stringify([{ jobId: job.jobId, fence: Number(job.fence), result: { late: true } }]),
        ]),
    ]) {
      const job = await claimedPastDeadline();
      expect(await send(job)).toBe('stale');
      expect((await admin.getJob(job.jobId))?.state).toBe('active');
      await db.pool.query('SELECT workhorse.tick_v1()');
      await expectDeadlineFailure(job.jobId);
    }
  });

  it('a failure schedules no retry, not even a timeout the owner reports', async () => {
    for (const options of [{}, { attemptOutcome: 'timeout' }]) {
      const job = await claimedPastDeadline({ executionTimeoutMs: 60_000 });
      expect((await fail(db.pool, job, { name: 'Error', message: 'boom' }, options)).status).toBe('stale');
      await db.pool.query('SELECT workhorse.expire_deadlines_v1(1000)');
      await expectDeadlineFailure(job.jobId);
    }
  });

  it('every other owner write is stale too: heartbeat, checkpoint, progress, sleep, release, cancel acknowledgement', async () => {
    const job = await claimedPastDeadline();
    const owner = [job.jobId, job.workerId, job.fence];
    expect(
      await status('SELECT status FROM workhorse.heartbeat_many_v1($1, $2::jsonb, 60000)', [
        job.workerId,
        JSON.stringify([{ jobId: job.jobId, fence: Number(job.fence) }]),
      ]),
    ).toBe('stale');
    expect(await status(`SELECT workhorse.save_checkpoint_v1($1, $2, $3, 'stage', '1'::jsonb) AS status`, owner)).toBe('stale');
    expect(await status(`SELECT workhorse.set_progress_v1($1, $2, $3, '1'::jsonb) AS status`, owner)).toBe('stale');
    expect(await status(`SELECT status FROM workhorse.sleep_v1($1, $2, $3, 'nap', NULL, 60000)`, owner)).toBe('stale');
    expect(await status(`SELECT workhorse.release_v1($1, $2, $3, 0, 'bye') AS status`, owner)).toBe('stale');
    await db.pool.query(`UPDATE workhorse.job_runtime SET cancel_requested_at = clock_timestamp() WHERE job_id = $1`, [job.jobId]);
    expect(await status(`SELECT workhorse.acknowledge_cancel_v1($1, $2, $3) AS status`, owner)).toBe('stale');
    expect((await db.pool.query('SELECT 1 FROM workhorse.job_checkpoint WHERE job_id = $1', [job.jobId])).rowCount).toBe(0);
    await db.pool.query('SELECT workhorse.expire_deadlines_v1(1000)');
    await expectDeadlineFailure(job.jobId);
  });

  it('with a real worker: a handler that returns after the deadline is not recorded as a success', async () => {
    const q = freshQueue();
    const hold = gate();
    let started = false;
    // Maintenance of its own only at start (tickMs 10 minutes), and heartbeats far apart: only the
    // completion's own check can keep the late result out.
    const worker = new Worker(queue, { queues: [q], listen: false, pollMs: 50, tickMs: 600_000, leaseMs: 60_000 }).handle(
      'late.job',
      async () => {
        started = true;
        await hold.promise;
        return { late: true };
      },
    );
    const events: WorkerEvent[] = [];
    worker.on((e) => events.push(e));
    const jobId = await queue.enqueue('late.job', {}, { queue: q, deadline: new Date(Date.now() + 3_600_000) });
    void worker.run().catch(() => undefined);
    try {
      await waitFor(() => started, 10_000, 'the handler to start');
      // The deadline passes while the handler runs (moved by hand rather than waited for).
      await db.pool.query("UPDATE workhorse.job_runtime SET deadline = clock_timestamp() - interval '1 second' WHERE job_id = $1", [jobId]);
      hold.open();
      await waitFor(() => events.find((e) => e.name === 'job.lease_lost'), 10_000, 'the late completion to be refused');
      expect(events.filter((e) => e.name === 'job.succeeded')).toEqual([]);
    } finally {
      hold.open();
      await worker.stop();
    }
    await db.pool.query('SELECT workhorse.tick_v1()');
    await expectDeadlineFailure(jobId);
  });
});

describe('other ways out of a job past its deadline', () => {
  it('a cancel finds the job already over: failed by its deadline', async () => {
    const q = freshQueue();
    const waiting = await queue.enqueue('late.job', {}, { queue: q, deadline: new Date(Date.now() + 3_600_000) });
    await db.pool.query("UPDATE workhorse.job_runtime SET deadline = clock_timestamp() - interval '1 second' WHERE job_id = $1", [waiting]);
    expect(await admin.cancel(waiting)).toBe('already_terminal');
    expect(await admin.getJob(waiting)).toMatchObject({ state: 'failed', currentAttempt: 0, error: { name: 'DeadlineExceeded' } });

    const running = await claimedPastDeadline();
    expect(await admin.cancel(running.jobId)).toBe('already_terminal');
    await expectDeadlineFailure(running.jobId);
  });

  it('recovery of an expired lease after the deadline fails the job by its deadline, without a retry', async () => {
    const job = await claimedPastDeadline();
    await forceExpire(db.pool, job.jobId);
    expect((await db.pool.query<{ n: number }>('SELECT workhorse.recover_expired_v1(1000) AS n')).rows[0].n).toBe(1);
    await expectDeadlineFailure(job.jobId);
    const kinds = (await admin.getJobTimeline(job.jobId)).items.map((e) => e.kind);
    expect(kinds).not.toContain('lease_expired');
  });
});
