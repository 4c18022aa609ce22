/**
 * The attempt history: one closing row per opened attempt, attempt numbers never used twice.
 * An attempt that ends while its job sleeps (a cancel, a deadline) gets its row; a release
 * closes a fresh attempt under its own number and gives its place in the budget back, and
 * hands a slept attempt back still open. Every test file also checks this for every job it
 * touched (test/support/invariants.ts).
 */
import { freshQueue } from '../support/db';
import { attemptHistoryViolations } from '../support/invariants';
import { claimOne, complete, type Owner } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

interface AttemptRow {
  attempt: number;
  outcome: string;
  worker_id: string;
  fence_token: string;
  error: { name: string } | null;
}

const { db, queue, admin } = useTestDatabase();

async function attemptsOf(jobId: string): Promise<AttemptRow[]> {
  const { rows } = await db.pool.query<AttemptRow>(
    'SELECT attempt, outcome, worker_id, fence_token, error FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
    [jobId],
  );
  return rows;
}

/** Puts the claimed job to sleep until `ms` from now through sleep_v1; returns the status. */
async function sleep(owner: Owner, name: string, ms: number): Promise<string> {
  const { rows } = await db.pool.query<{ status: string }>('SELECT status FROM workhorse.sleep_v1($1, $2, $3, $4, NULL, $5)', [
    owner.jobId,
    owner.workerId,
    owner.fence,
    name,
    ms,
  ]);
  return rows[0].status;
}

async function release(owner: Owner, delayMs = 0): Promise<string> {
  const { rows } = await db.pool.query<{ status: string }>('SELECT workhorse.release_v1($1, $2, $3, $4, $5) AS status', [
    owner.jobId,
    owner.workerId,
    owner.fence,
    delayMs,
    'no handler here',
  ]);
  return rows[0].status;
}

/** Makes a sleeping (scheduled) job due now and promotes it. */
async function wake(jobId: string): Promise<void> {
  await db.pool.query("UPDATE workhorse.job_runtime SET run_at = clock_timestamp() WHERE job_id = $1 AND state = 'scheduled'", [jobId]);
  await db.pool.query('SELECT workhorse.promote_v1(1000)');
}

describe('an attempt that ends while its job sleeps', () => {
  it('a cancel closes it as `canceled`, under the worker and fence that ran it', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('history.sleeper', {}, { queue: q });
    const job = await claimOne(db.pool, q, { workerId: 'sleeper-worker' });
    expect(await sleep(job, 'nap', 3_600_000)).toBe('sleeping');
    expect(await attemptsOf(jobId)).toEqual([]);

    expect(await admin.cancel(jobId, { reason: 'no longer needed' })).toBe('canceled');
    expect(await attemptsOf(jobId)).toEqual([
      {
        attempt: 1,
        outcome: 'canceled',
        worker_id: 'sleeper-worker',
        fence_token: job.fence,
        error: { name: 'Canceled', message: 'no longer needed' },
      },
    ]);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'canceled', currentAttempt: 1 });
  });

  it('a deadline closes it as `deadline`', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('history.sleeper', {}, { queue: q, deadline: new Date(Date.now() + 3_600_000) });
    const job = await claimOne(db.pool, q, { workerId: 'sleeper-worker' });
    expect(await sleep(job, 'nap', 7_200_000)).toBe('sleeping');
    // The deadline passes while the job sleeps (moved by hand rather than waited for).
    await db.pool.query("UPDATE workhorse.job_runtime SET deadline = clock_timestamp() - interval '1 second' WHERE job_id = $1", [jobId]);
    await db.pool.query('SELECT workhorse.expire_deadlines_v1(1000)');

    const attempts = await attemptsOf(jobId);
    expect(attempts).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'deadline', worker_id: 'sleeper-worker', fence_token: job.fence }),
    ]);
    expect(attempts[0].error?.name).toBe('DeadlineExceeded');
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'failed', currentAttempt: 1, error: { name: 'DeadlineExceeded' } });
  });

  it('after a resume and a second sleep, the row names the run that slept last', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('history.sleeper', {}, { queue: q });
    const first = await claimOne(db.pool, q, { workerId: 'first-worker' });
    expect(await sleep(first, 'one', 1000)).toBe('sleeping');
    await wake(jobId);
    const second = await claimOne(db.pool, q, { workerId: 'second-worker' });
    expect(second.attempt).toBe(1);
    expect(await sleep(second, 'two', 3_600_000)).toBe('sleeping');

    expect(await admin.cancel(jobId)).toBe('canceled');
    expect(await attemptsOf(jobId)).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'canceled', worker_id: 'second-worker', fence_token: second.fence }),
    ]);
  });

  it('a job that is not asleep and ran no attempt is canceled without a row', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('history.waiting', {}, { queue: q, runAt: new Date(Date.now() + 3_600_000) });
    expect(await admin.cancel(jobId)).toBe('canceled');
    expect(await attemptsOf(jobId)).toEqual([]);
  });
});

describe('a release', () => {
  it('closes the attempt it opened under its own number and gives its place back: the next claim opens the next number', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('history.released', {}, { queue: q, maxAttempts: 1 });
    const ignorant = await claimOne(db.pool, q, { workerId: 'ignorant' });
    expect(ignorant.attempt).toBe(1);
    expect(await release(ignorant)).toBe('released');
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'ready', currentAttempt: 1, maxAttempts: 1 });

    const able = await claimOne(db.pool, q, { workerId: 'able' });
    // A new number; maxAttempts 1 and the job still gets its one counted attempt.
    expect(able.attempt).toBe(2);
    expect(able.maxAttempts).toBe(2);
    expect(await complete(db.pool, able, 'done')).toBe('succeeded');
    expect((await attemptsOf(jobId)).map((a) => [a.attempt, a.outcome, a.worker_id])).toEqual([
      [1, 'released', 'ignorant'],
      [2, 'succeeded', 'able'],
    ]);
  });

  it('gives the place back for the retry budget too: a released attempt is not counted', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('history.released', {}, { queue: q, maxAttempts: 2, retryPolicy: { kind: 'fixed', delayMs: 0 } });
    expect(await release(await claimOne(db.pool, q, { workerId: 'ignorant' }))).toBe('released');
    for (const expected of ['retry_scheduled', 'failed']) {
      const job = await claimOne(db.pool, q, { workerId: 'able' });
      const { rows } = await db.pool.query<{ status: string }>('SELECT status FROM workhorse.fail_v1($1, $2, $3, $4::jsonb)', [
        job.jobId,
        job.workerId,
        job.fence,
        '{"name": "Error", "message": "boom"}',
      ]);
      expect(rows[0].status).toBe(expected);
    }
    expect((await attemptsOf(jobId)).map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'released'],
      [2, 'failed'],
      [3, 'failed'],
    ]);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'failed', currentAttempt: 3 });
  });

  it('hands a slept attempt back still open: no row, and the next claim continues it', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('history.released', {}, { queue: q });
    const first = await claimOne(db.pool, q, { workerId: 'able' });
    expect(await sleep(first, 'nap', 1000)).toBe('sleeping');
    await wake(jobId);
    const resumed = await claimOne(db.pool, q, { workerId: 'ignorant' });
    expect(resumed.attempt).toBe(1);
    expect(await release(resumed)).toBe('released');
    expect(await attemptsOf(jobId)).toEqual([]);
    expect(await attemptHistoryViolations(db.pool)).toEqual([]);

    const again = await claimOne(db.pool, q, { workerId: 'able' });
    expect(again.attempt).toBe(1);
    expect(await complete(db.pool, again, 'done')).toBe('succeeded');
    expect((await attemptsOf(jobId)).map((a) => [a.attempt, a.outcome, a.worker_id])).toEqual([[1, 'succeeded', 'able']]);
  });
});
