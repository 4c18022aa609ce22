/**
 * Fencing: once a worker has lost a job (its lease ran out, the job was recovered and another
 * worker claimed it, or the job ended), every owner write it still makes reports `stale` and
 * changes nothing, at the SQL protocol level and through the Worker runtime.
 */
import { LeaseLostError, Worker, type HandlerContext, type WorkerEvent } from '../../lib/core';
import { freshQueue } from '../support/db';
import { claimOne, forceExpire, type ClaimedJob } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { gate, waitFor } from '../support/wait';

const { pool, queue, admin } = useTestDatabase();

/** Everything the protocol keeps about one job, to prove that a stale write changed nothing. */
async function snapshot(jobId: string): Promise<Record<string, unknown[]>> {
  const read = async (sql: string): Promise<unknown[]> => (await pool.query(sql, [jobId])).rows;
  return {
    job: await read('SELECT * FROM workhorse.job WHERE id = $1'),
    runtime: await read('SELECT * FROM workhorse.job_runtime WHERE job_id = $1'),
    outcome: await read('SELECT * FROM workhorse.job_outcome WHERE job_id = $1'),
    checkpoints: await read('SELECT * FROM workhorse.job_checkpoint WHERE job_id = $1 ORDER BY name'),
    events: await read('SELECT * FROM workhorse.job_event WHERE job_id = $1 ORDER BY id'),
    attempts: await read('SELECT * FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id'),
  };
}

async function heartbeat(workerId: string, jobId: string, fence: string): Promise<string> {
  const { rows } = await pool.query<{ job_id: string; status: string }>(
    'SELECT job_id, status FROM workhorse.heartbeat_many_v1($1, $2::jsonb, 60000)',
    [workerId, JSON.stringify([{ jobId, fence: Number(fence) }])],
  );
  expect(rows).toHaveLength(1);
  expect(rows[0].job_id).toBe(jobId);
  return rows[0].status;
}

async function completeOne(workerId: string, jobId: string, fence: string, result: unknown): Promise<string> {
  const { rows } = await pool.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status', [
    jobId,
    workerId,
    fence,
    JSON.stringify(result),
  ]);
  return rows[0].status;
}

async function completeMany(workerId: string, jobId: string, fence: string, result: unknown): Promise<string> {
  const { rows } = await pool.query<{ job_id: string; status: string }>(
    'SELECT job_id, status FROM workhorse.complete_many_v1($1, $2::jsonb)',
    [workerId, JSON.stringify([{ jobId, fence: Number(fence), result }])],
  );
  expect(rows).toHaveLength(1);
  return rows[0].status;
}

async function failOne(workerId: string, jobId: string, fence: string, options: object = {}): Promise<string> {
  const { rows } = await pool.query<{ status: string }>(
    'SELECT status FROM workhorse.fail_v1($1, $2, $3, $4::jsonb, $5::jsonb)',
    [jobId, workerId, fence, JSON.stringify({ name: 'Error', message: 'late failure' }), JSON.stringify(options)],
  );
  return rows[0].status;
}

async function checkpoint(workerId: string, jobId: string, fence: string, name: string, value: unknown): Promise<string> {
  const { rows } = await pool.query<{ status: string }>(
    'SELECT workhorse.save_checkpoint_v1($1, $2, $3, $4, $5::jsonb) AS status',
    [jobId, workerId, fence, name, JSON.stringify(value)],
  );
  return rows[0].status;
}

async function release(workerId: string, jobId: string, fence: string): Promise<string> {
  const { rows } = await pool.query<{ status: string }>(
    "SELECT workhorse.release_v1($1, $2, $3, 0, 'late release') AS status",
    [jobId, workerId, fence],
  );
  return rows[0].status;
}

async function acknowledgeCancel(workerId: string, jobId: string, fence: string): Promise<string> {
  const { rows } = await pool.query<{ status: string }>('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3) AS status', [
    jobId,
    workerId,
    fence,
  ]);
  return rows[0].status;
}

/** Every owner write the protocol has, made with the given identity; each must say `stale`. */
async function expectEveryOwnerWriteStale(
  workerId: string,
  jobId: string,
  fence: string,
  completion: 'stale' | 'succeeded' = 'stale',
): Promise<void> {
  const before = await snapshot(jobId);
  expect(await heartbeat(workerId, jobId, fence)).toBe('stale');
  // `succeeded` only for the owner whose own completion already committed: a repeat (after a
  // lost answer) is recognised by its fence and writes nothing.
  expect(await completeOne(workerId, jobId, fence, { by: workerId })).toBe(completion);
  expect(await completeMany(workerId, jobId, fence, { by: workerId })).toBe(completion);
  expect(await failOne(workerId, jobId, fence)).toBe('stale');
  expect(await failOne(workerId, jobId, fence, { nonRetryable: true })).toBe('stale');
  expect(await checkpoint(workerId, jobId, fence, 'late-stage', { by: workerId })).toBe('stale');
  expect(await release(workerId, jobId, fence)).toBe('stale');
  expect(await acknowledgeCancel(workerId, jobId, fence)).toBe('stale');
  expect(await snapshot(jobId)).toEqual(before);
}

describe('fencing at the SQL protocol', () => {
  it('a worker whose lease expired and whose job was recovered and re-claimed changes nothing', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('fence.job', { n: 1 }, { queue: q, maxAttempts: 5 });

    const a = await claimOne(pool, q, { workerId: 'worker-A', leaseMs: 1000 });
    expect(a).toMatchObject({ jobId, fence: expect.any(String), attempt: 1 });
    expect(await checkpoint('worker-A', jobId, a.fence, 'stage-1', { from: 'A' })).toBe('saved');

    await forceExpire(pool, jobId);
    expect((await pool.query<{ n: number }>('SELECT workhorse.recover_expired_v1(100) AS n')).rows[0].n).toBe(1);

    const attempts = await pool.query(
      'SELECT attempt, outcome, worker_id, fence_token FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
      [jobId],
    );
    expect(attempts.rows).toEqual([{ attempt: 1, outcome: 'expired', worker_id: 'worker-A', fence_token: a.fence }]);
    const recovered = await admin.getJob(jobId);
    expect(recovered).toMatchObject({ state: 'ready', currentAttempt: 1, workerId: null, error: { name: 'LeaseExpired' } });
    const timeline = (await admin.getJobTimeline(jobId)).items;
    expect(timeline.filter((e) => e.source === 'event' && e.kind === 'lease_expired')).toEqual([
      expect.objectContaining({ attempt: 1, workerId: 'worker-A', fenceToken: a.fence }),
    ]);

    const b = await claimOne(pool, q, { workerId: 'worker-B', leaseMs: 60000 });
    expect(b.jobId).toBe(jobId);
    expect(b.attempt).toBe(2);
    expect(BigInt(b.fence)).toBeGreaterThan(BigInt(a.fence));

    // A comes back to life and tries everything with its old fence.
    await expectEveryOwnerWriteStale('worker-A', jobId, a.fence);
    // Even A writing a checkpoint name that does not exist yet leaves none behind.
    expect((await pool.query("SELECT 1 FROM workhorse.job_checkpoint WHERE job_id = $1 AND name = 'late-stage'", [jobId])).rowCount).toBe(0);
    const owned = await admin.getJob(jobId);
    expect(owned).toMatchObject({ state: 'active', workerId: 'worker-B', currentAttempt: 2 });

    // The checkpoint A saved while it still owned the job stays, and is handed to B's run.
    const checkpoints = await pool.query<{ value: unknown; worker_id: string }>(
      'SELECT value, worker_id FROM workhorse.read_checkpoints_v1($1)',
      [jobId],
    );
    expect(checkpoints.rows).toEqual([{ value: { from: 'A' }, worker_id: 'worker-A' }]);

    expect(await heartbeat('worker-B', jobId, b.fence)).toBe('accepted');
    expect(await completeOne('worker-B', jobId, b.fence, { by: 'B' })).toBe('succeeded');
    const done = await admin.getJob(jobId);
    expect(done).toMatchObject({ state: 'succeeded', result: { by: 'B' }, currentAttempt: 2 });
    const finalAttempts = await pool.query(
      'SELECT attempt, outcome, worker_id FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
      [jobId],
    );
    expect(finalAttempts.rows).toEqual([
      { attempt: 1, outcome: 'expired', worker_id: 'worker-A' },
      { attempt: 2, outcome: 'succeeded', worker_id: 'worker-B' },
    ]);
    const outcome = await pool.query('SELECT worker_id, fence_token FROM workhorse.job_outcome WHERE job_id = $1', [jobId]);
    expect(outcome.rows).toEqual([{ worker_id: 'worker-B', fence_token: b.fence }]);

    // After the end a terminal job never changes: the old owner is stale, and the last owner's
    // repeated completion is acknowledged without a second outcome.
    await expectEveryOwnerWriteStale('worker-A', jobId, a.fence);
    await expectEveryOwnerWriteStale('worker-B', jobId, b.fence, 'succeeded');
  });

  it('the owner with the right fence is stale once its lease has run out, even before recovery', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('fence.job', { n: 2 }, { queue: q });
    const a = await claimOne(pool, q, { workerId: 'worker-A', leaseMs: 1000 });
    await forceExpire(pool, jobId);

    await expectEveryOwnerWriteStale('worker-A', jobId, a.fence);
    // Nothing recovered it yet: the runtime row still names A, and only recovery moves it on.
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'active', workerId: 'worker-A' });
    expect((await pool.query<{ n: number }>('SELECT workhorse.recover_expired_v1(100) AS n')).rows[0].n).toBe(1);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'ready', currentAttempt: 1 });
  });

  it('a lease that really ran out on the clock is stale too', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('fence.job', { n: 3 }, { queue: q });
    const a = await claimOne(pool, q, { workerId: 'worker-A', leaseMs: 1000 });
    await waitFor(
      async () =>
        (await pool.query<{ expired: boolean }>(
          'SELECT lease_expires_at <= clock_timestamp() AS expired FROM workhorse.job_runtime WHERE job_id = $1',
          [jobId],
        )).rows[0].expired,
      5000,
      'the 1 s lease to run out',
    );
    const before = await snapshot(jobId);
    expect(await heartbeat('worker-A', jobId, a.fence)).toBe('stale');
    expect(await completeOne('worker-A', jobId, a.fence, { late: true })).toBe('stale');
    expect(await snapshot(jobId)).toEqual(before);
    // Recover it here, so the next test's recovery counts only its own job.
    expect((await pool.query<{ n: number }>('SELECT workhorse.recover_expired_v1(100) AS n')).rows[0].n).toBe(1);
    // Waiting for attempt 2: ready, or scheduled while the retry delay since the lease ran out lasts.
    expect(['ready', 'scheduled']).toContain((await admin.getJob(jobId))?.state);
  });

  it('another worker id with the right fence, or the right worker with another fence, is stale', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('fence.job', { n: 4 }, { queue: q });
    const a = await claimOne(pool, q, { workerId: 'worker-A', leaseMs: 60000 });

    await expectEveryOwnerWriteStale('worker-X', jobId, a.fence);
    await expectEveryOwnerWriteStale('worker-A', jobId, (BigInt(a.fence) + 1n).toString());

    // The real owner was never disturbed.
    expect(await completeOne('worker-A', jobId, a.fence, { ok: true })).toBe('succeeded');
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'succeeded', result: { ok: true }, currentAttempt: 1 });
  });

  it('a stale worker cannot acknowledge a cancellation meant for the new owner', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('fence.job', { n: 5 }, { queue: q });
    const a = await claimOne(pool, q, { workerId: 'worker-A', leaseMs: 1000 });
    await forceExpire(pool, jobId);
    expect((await pool.query<{ n: number }>('SELECT workhorse.recover_expired_v1(100) AS n')).rows[0].n).toBe(1);
    const b = await claimOne(pool, q, { workerId: 'worker-B', leaseMs: 60000 });
    expect(await admin.cancel(jobId, { reason: 'operator' })).toBe('cancel_requested');

    const before = await snapshot(jobId);
    expect(await acknowledgeCancel('worker-A', jobId, a.fence)).toBe('stale');
    expect(await release('worker-A', jobId, a.fence)).toBe('stale');
    expect(await failOne('worker-A', jobId, a.fence)).toBe('stale');
    expect(await snapshot(jobId)).toEqual(before);

    expect(await heartbeat('worker-B', jobId, b.fence)).toBe('cancel_requested');
    expect(await acknowledgeCancel('worker-B', jobId, b.fence)).toBe('canceled');
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'canceled', currentAttempt: 2 });
    await expectEveryOwnerWriteStale('worker-B', jobId, b.fence);
  });

  it('writes for failed and canceled jobs are stale', async () => {
    const q = freshQueue();
    const failedId = await queue.enqueue('fence.job', { n: 6 }, { queue: q, maxAttempts: 1 });
    const f = await claimOne(pool, q, { workerId: 'worker-A', leaseMs: 60000 });
    expect(await failOne('worker-A', failedId, f.fence)).toBe('failed');
    await expectEveryOwnerWriteStale('worker-A', failedId, f.fence);
    expect(await admin.getJob(failedId)).toMatchObject({ state: 'failed', error: { message: 'late failure' } });

    const canceledId = await queue.enqueue('fence.job', { n: 7 }, { queue: q });
    const c = await claimOne(pool, q, { workerId: 'worker-A', leaseMs: 60000 });
    expect(await admin.cancel(canceledId)).toBe('cancel_requested');
    expect(await acknowledgeCancel('worker-A', canceledId, c.fence)).toBe('canceled');
    await expectEveryOwnerWriteStale('worker-A', canceledId, c.fence);
    expect(await admin.getJob(canceledId)).toMatchObject({ state: 'canceled' });
  });
});

describe('fencing in the Worker runtime', () => {
  const workers: { worker: Worker; done: Promise<void> }[] = [];

  afterEach(async () => {
    for (const { worker, done } of workers.splice(0)) {
      await worker.stop();
      await done;
    }
  });

  function start(worker: Worker): WorkerEvent[] {
    const events: WorkerEvent[] = [];
    worker.on((event) => events.push(event));
    workers.push({ worker, done: worker.run() });
    return events;
  }

  /**
   * What a crash-and-takeover looks like from the database: the lease is pushed into the past
   * (the test is about the protocol, not the lease length), recovery makes the job ready, and
   * worker B claims it, all in one transaction so the first worker can never claim it back.
   */
  async function takeOver(jobId: string, q: string): Promise<ClaimedJob> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await forceExpire(client, jobId);
      const recovered = await client.query<{ n: number }>('SELECT workhorse.recover_expired_v1(100) AS n');
      expect(recovered.rows[0].n).toBe(1);
      const b = await claimOne(client, q, { workerId: 'worker-B', leaseMs: 60000 });
      expect(b.jobId).toBe(jobId);
      await client.query('COMMIT');
      return b;
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  }

  it('a worker that lost its lease sees ctx.signal abort with LeaseLostError, reports job.lease_lost and writes nothing', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('fence.slow', { n: 1 }, { queue: q });
    const release = gate();
    let ctxSeen: HandlerContext | undefined;
    let lateOperationRan = false;
    let lateCheckpointError: unknown;
    const worker = new Worker(queue, { queues: [q], concurrency: 1, leaseMs: 1000, workerId: 'worker-A', pollMs: 100 });
    worker.handle('fence.slow', async (_payload: unknown, ctx: HandlerContext) => {
      ctxSeen = ctx;
      await release.promise;
      try {
        await ctx.checkpoint('late', () => {
          lateOperationRan = true;
          return 1;
        });
      } catch (error) {
        lateCheckpointError = error;
      }
      return { by: 'A' };
    });
    const events = start(worker);

    const ctx = await waitFor(() => ctxSeen, 10000, 'worker A to start the job');
    const b = await takeOver(jobId, q);

    // A's next heartbeat (every lease/3) is refused, and A gives the job up locally.
    await waitFor(() => ctx.signal.aborted, 5000, "worker A's signal to abort");
    expect(ctx.signal.reason).toBeInstanceOf(LeaseLostError);
    expect((ctx.signal.reason as LeaseLostError).jobId).toBe(jobId);

    release.open();
    await waitFor(() => events.find((e) => e.name === 'job.lease_lost'), 5000, 'job.lease_lost');
    expect(lateCheckpointError).toBeInstanceOf(LeaseLostError);
    expect(lateOperationRan).toBe(false);
    expect(events.map((e) => e.name)).not.toContain('job.succeeded');
    expect(events.find((e) => e.name === 'job.lease_lost')).toMatchObject({ jobId, workerId: 'worker-A', attempt: 1 });

    // Nothing of A's landed: B still owns the live job, and no checkpoint was written.
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'active', workerId: 'worker-B', currentAttempt: 2 });
    expect((await pool.query('SELECT 1 FROM workhorse.job_checkpoint WHERE job_id = $1', [jobId])).rowCount).toBe(0);

    expect(await completeOne('worker-B', jobId, b.fence, { by: 'B' })).toBe('succeeded');
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'succeeded', result: { by: 'B' }, currentAttempt: 2 });
    const attempts = await pool.query(
      'SELECT attempt, outcome, worker_id FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
      [jobId],
    );
    expect(attempts.rows).toEqual([
      { attempt: 1, outcome: 'expired', worker_id: 'worker-A' },
      { attempt: 2, outcome: 'succeeded', worker_id: 'worker-B' },
    ]);
  });

  it('a handler that returns after an unnoticed takeover gets a stale completion: job.lease_lost, B decides the outcome', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('fence.slow', { n: 2 }, { queue: q });
    const release = gate();
    let ctxSeen: HandlerContext | undefined;
    // A long lease and heartbeat interval, so A does not learn of the takeover from a heartbeat:
    // only its completion finds out.
    const worker = new Worker(queue, { queues: [q], concurrency: 1, leaseMs: 60000, workerId: 'worker-A', pollMs: 100 });
    worker.handle('fence.slow', async (_payload: unknown, ctx: HandlerContext) => {
      ctxSeen = ctx;
      await release.promise;
      return { by: 'A' };
    });
    const events = start(worker);

    await waitFor(() => ctxSeen, 10000, 'worker A to start the job');
    const b = await takeOver(jobId, q);
    const before = await snapshot(jobId);
    release.open();
    await waitFor(() => events.find((e) => e.name === 'job.lease_lost'), 5000, 'job.lease_lost');
    expect(events.map((e) => e.name)).not.toContain('job.succeeded');
    expect(await snapshot(jobId)).toEqual(before);

    expect(await completeOne('worker-B', jobId, b.fence, { by: 'B' })).toBe('succeeded');
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'succeeded', result: { by: 'B' } });
  });

  it('ctx.checkpoint after an unnoticed takeover throws LeaseLostError, aborts ctx.signal and stores nothing', async () => {
    const q = freshQueue();
    const jobId = await queue.enqueue('fence.slow', { n: 3 }, { queue: q });
    const release = gate();
    let ctxSeen: HandlerContext | undefined;
    let checkpointError: unknown;
    const worker = new Worker(queue, { queues: [q], concurrency: 1, leaseMs: 60000, workerId: 'worker-A', pollMs: 100 });
    worker.handle('fence.slow', async (_payload: unknown, ctx: HandlerContext) => {
      ctxSeen = ctx;
      await release.promise;
      try {
        return await ctx.checkpoint('charge', () => ({ charged: 'by A' }));
      } catch (error) {
        checkpointError = error;
        throw error;
      }
    });
    const events = start(worker);

    const ctx = await waitFor(() => ctxSeen, 10000, 'worker A to start the job');
    const b = await takeOver(jobId, q);
    const before = await snapshot(jobId);
    release.open();
    await waitFor(() => events.find((e) => e.name === 'job.lease_lost'), 5000, 'job.lease_lost');

    expect(checkpointError).toBeInstanceOf(LeaseLostError);
    expect(ctx.signal.aborted).toBe(true);
    expect(ctx.signal.reason).toBeInstanceOf(LeaseLostError);
    // The handler's throw was not recorded as a failure of B's attempt.
    expect(events.map((e) => e.name)).not.toContain('job.retry_scheduled');
    expect(events.map((e) => e.name)).not.toContain('job.failed');
    expect(await snapshot(jobId)).toEqual(before);

    expect(await completeOne('worker-B', jobId, b.fence, { by: 'B' })).toBe('succeeded');
  });
});
