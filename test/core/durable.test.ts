/**
 * Idempotent enqueue (keys, scopes, expiry, races) and durable sleeps (`ctx.sleep`,
 * `ctx.sleepUntil`, `sleep_v1`), including a worker process killed while its job sleeps.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { PoolClient } from 'pg';
import {
  IdempotencyConflictError,
  JobSleeping,
  Worker,
  WorkhorseValidationError,
  type HandlerContext,
  type TimelineEntry,
  type WorkerEvent,
} from '../../lib/core';
import { CREATE_SIDE_EFFECTS_SQL, recordSideEffect, sideEffects } from '../fixtures/side-effects';
import { FixtureProcesses, waitForLine } from '../support/fixture-process';
import { expectRejects } from '../support/expect-rejects';
import { claimOne } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const FIXTURE = join(__dirname, '..', 'fixtures', 'sleep-worker.ts');

const TABLES = ['job', 'job_runtime', 'job_query', 'job_event', 'enqueue_idempotency'] as const;
type RowCounts = Record<(typeof TABLES)[number], number>;

const { db, pool, queue, admin } = useTestDatabase({
  beforeDrop: async () => {
    await children.killAll();
    await Promise.all(workers.map((w) => w.stop().catch(() => undefined)));
    await Promise.all(runs.map((r) => r.catch(() => undefined)));
  },
});
const workers: Worker[] = [];
const runs: Promise<void>[] = [];

const children = new FixtureProcesses();

beforeAll(async () => {
  await pool.query(CREATE_SIDE_EFFECTS_SQL);
});

async function countRows(): Promise<RowCounts> {
  const { rows } = await pool.query<RowCounts>(
    `SELECT ${TABLES.map((t) => `(SELECT count(*)::int FROM workhorse.${t}) AS ${t}`).join(', ')}`,
  );
  return rows[0];
}

async function events(jobId: string): Promise<TimelineEntry[]> {
  return (await admin.getJobTimeline(jobId, { limit: 200 })).items.filter((e) => e.source === 'event');
}

async function waitForState(jobId: string, state: string, timeoutMs: number): Promise<void> {
  await waitFor(async () => (await admin.getJob(jobId))?.state === state, timeoutMs, `job ${jobId} to be ${state}`);
}

function startWorker(worker: Worker): void {
  workers.push(worker);
  runs.push(worker.run());
}

async function sqlSleep(
  jobId: string,
  workerId: string,
  fence: string,
  name: string,
  until: Date | null,
  delayMs: number | null,
): Promise<{ status: string; wake_at: Date | null }> {
  const { rows } = await pool.query<{ status: string; wake_at: Date | null }>(
    'SELECT status, wake_at FROM workhorse.sleep_v1($1, $2, $3, $4, $5, $6)',
    [jobId, workerId, fence, name, until, delayMs],
  );
  return rows[0];
}

describe('idempotent enqueue', () => {
  it('an exact replay returns the existing job id and writes nothing', async () => {
    const first = await queue.enqueue('idem.replay', { n: 1 }, { queue: 'idem-replay', priority: 5, idempotencyKey: 'replay-1' });
    const before = await countRows();

    const again = await queue.enqueue('idem.replay', { n: 1 }, { queue: 'idem-replay', priority: 5, idempotencyKey: 'replay-1' });
    // A replay inside a batch is answered in its position, next to a genuinely new job.
    const [batchReplay, fresh] = await queue.enqueueMany([
      { type: 'idem.replay', payload: { n: 1 }, queue: 'idem-replay', priority: 5, idempotencyKey: 'replay-1' },
      { type: 'idem.replay', payload: { n: 2 }, queue: 'idem-replay' },
    ]);

    expect(again).toBe(first);
    expect(batchReplay).toBe(first);
    expect(fresh).not.toBe(first);
    const after = await countRows();
    // Only the unkeyed job of the batch wrote anything (one row per table, no idempotency row).
    expect(after).toEqual({
      job: before.job + 1,
      job_runtime: before.job_runtime + 1,
      job_query: before.job_query + 1,
      job_event: before.job_event + 1,
      enqueue_idempotency: before.enqueue_idempotency,
    });
    const replay = await queue.enqueue('idem.replay', { n: 1 }, { queue: 'idem-replay', priority: 5, idempotencyKey: 'replay-1' });
    expect(replay).toBe(first);
    expect(await countRows()).toEqual(after);
  });

  it('the same key with a different request raises IdempotencyConflictError naming exactly the differing fields', async () => {
    const first = await queue.enqueue('idem.conflict', { n: 1 }, { queue: 'idem-conflict', priority: 5, idempotencyKey: 'conflict-1' });
    const before = await countRows();

    const both = await expectRejects(
      queue.enqueue('idem.conflict', { n: 2 }, { queue: 'idem-conflict', priority: 7, idempotencyKey: 'conflict-1' }),
      IdempotencyConflictError,
    );
    expect(both).toBeInstanceOf(WorkhorseValidationError);
    expect(both.fields).toEqual(['payload', 'priority']);
    expect(both.existingJobId).toBe(first);
    expect(both.field).toBe('requests[0].idempotencyKey');

    const payloadOnly = await expectRejects(
      queue.enqueue('idem.conflict', { n: 2 }, { queue: 'idem-conflict', priority: 5, idempotencyKey: 'conflict-1' }),
      IdempotencyConflictError,
    );
    expect(payloadOnly.fields).toEqual(['payload']);
    expect(payloadOnly.existingJobId).toBe(first);

    // An option given once and left out the next time is a difference too.
    const dropped = await expectRejects(
      queue.enqueue('idem.conflict', { n: 1 }, { queue: 'idem-conflict', idempotencyKey: 'conflict-1' }),
      IdempotencyConflictError,
    );
    expect(dropped.fields).toEqual(['priority']);

    expect(await countRows()).toEqual(before);
    expect(await admin.getJob(first)).toMatchObject({ payload: { n: 1 }, priority: 5, state: 'ready' });
  });

  it('a conflict inside enqueueMany rolls back the whole batch', async () => {
    const first = await queue.enqueue('idem.batch', { n: 1 }, { queue: 'idem-batch', idempotencyKey: 'batch-1' });
    const before = await countRows();

    const error = await expectRejects(
      queue.enqueueMany([
        { type: 'idem.batch', payload: { n: 10 }, queue: 'idem-batch' },
        { type: 'idem.batch', payload: { n: 11 }, queue: 'idem-batch', idempotencyKey: 'batch-new' },
        { type: 'idem.batch', payload: { n: 99 }, queue: 'idem-batch', idempotencyKey: 'batch-1' },
      ]),
      IdempotencyConflictError,
    );
    expect(error.field).toBe('requests[2].idempotencyKey');
    expect(error.fields).toEqual(['payload']);
    expect(error.existingJobId).toBe(first);

    expect(await countRows()).toEqual(before);
    // The valid key of the batch was not reserved either: it is free for a new job.
    const { rows } = await pool.query('SELECT 1 FROM workhorse.enqueue_idempotency WHERE key_hash = sha256($1::bytea)', [
      Buffer.from('batch-new', 'utf8'),
    ]);
    expect(rows).toHaveLength(0);
    const listed = await admin.listJobs({ queue: 'idem-batch', limit: 10 });
    expect(listed.items.map((j) => j.id)).toEqual([first]);
  });

  describe('two transactions racing for one key', () => {
    async function backendPid(client: PoolClient): Promise<number> {
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      return rows[0].pid;
    }

    async function waitUntilBlocked(pid: number): Promise<void> {
      await waitFor(
        async () => {
          const { rows } = await pool.query<{ wait_event_type: string | null }>(
            'SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1',
            [pid],
          );
          return rows[0]?.wait_event_type === 'Lock';
        },
        5000,
        'the second transaction to wait for the first one\'s key',
      );
    }

    async function race(key: string, queueName: string, firstOutcome: 'COMMIT' | 'ROLLBACK'): Promise<{ firstId: string; secondId: string }> {
      const one = await pool.connect();
      const two = await pool.connect();
      try {
        await one.query('BEGIN');
        await two.query('BEGIN');
        const firstId = await queue.enqueue('idem.race', { key }, { queue: queueName, idempotencyKey: key }, one);
        const pid = await backendPid(two);
        const second = queue.enqueue('idem.race', { key }, { queue: queueName, idempotencyKey: key }, two);
        // Keep a rejection from going unhandled while the first transaction finishes.
        second.catch(() => undefined);
        await waitUntilBlocked(pid);
        await one.query(firstOutcome);
        const secondId = await second;
        await two.query('COMMIT');
        return { firstId, secondId };
      } finally {
        await one.query('ROLLBACK').catch(() => undefined);
        await two.query('ROLLBACK').catch(() => undefined);
        one.release();
        two.release();
      }
    }

    it('the second waits for the first to commit, then returns the same job: exactly one job', async () => {
      const { firstId, secondId } = await race('race-commit', 'idem-race-a', 'COMMIT');
      expect(secondId).toBe(firstId);
      const listed = await admin.listJobs({ queue: 'idem-race-a', limit: 10 });
      expect(listed.items.map((j) => j.id)).toEqual([firstId]);
      const { rows } = await pool.query('SELECT job_id FROM workhorse.enqueue_idempotency WHERE scope = $1', ['idem-race-a']);
      expect(rows).toEqual([{ job_id: firstId }]);
    });

    it('if the first rolls back, the second creates the job', async () => {
      const { firstId, secondId } = await race('race-rollback', 'idem-race-b', 'ROLLBACK');
      expect(secondId).not.toBe(firstId);
      expect(await admin.getJob(firstId)).toBeNull();
      expect(await admin.getJob(secondId)).toMatchObject({ state: 'ready', queue: 'idem-race-b' });
      const { rows } = await pool.query('SELECT job_id FROM workhorse.enqueue_idempotency WHERE scope = $1', ['idem-race-b']);
      expect(rows).toEqual([{ job_id: secondId }]);
    });
  });

  it('scopes: the default scope is the queue; an explicit scope spans queues', async () => {
    const a = await queue.enqueue('idem.scope', { n: 1 }, { queue: 'idem-scope-a', idempotencyKey: 'scoped' });
    const b = await queue.enqueue('idem.scope', { n: 1 }, { queue: 'idem-scope-b', idempotencyKey: 'scoped' });
    expect(b).not.toBe(a);
    const perQueue = await pool.query<{ scope: string; job_id: string }>(
      'SELECT scope, job_id FROM workhorse.enqueue_idempotency WHERE scope LIKE $1 ORDER BY scope',
      ['idem-scope-%'],
    );
    expect(perQueue.rows).toEqual([
      { scope: 'idem-scope-a', job_id: a },
      { scope: 'idem-scope-b', job_id: b },
    ]);

    const options = { idempotencyKey: 'shared-key', idempotencyScope: 'orders-shared' };
    const c = await queue.enqueue('idem.scope', { n: 1 }, { ...options, queue: 'idem-scope-c' });
    expect(await queue.enqueue('idem.scope', { n: 1 }, { ...options, queue: 'idem-scope-c' })).toBe(c);
    // Same scope from another queue: the key already stands for job c. The queue is part of the
    // request, so it is reported as the difference rather than silently replayed.
    const other = await expectRejects(
      queue.enqueue('idem.scope', { n: 1 }, { ...options, queue: 'idem-scope-d' }),
      IdempotencyConflictError,
    );
    expect(other.existingJobId).toBe(c);
    expect(other.fields).toEqual(['queue']);
    expect((await admin.listJobs({ queue: 'idem-scope-d', limit: 10 })).items).toEqual([]);
    const shared = await pool.query('SELECT job_id FROM workhorse.enqueue_idempotency WHERE scope = $1', ['orders-shared']);
    expect(shared.rows).toEqual([{ job_id: c }]);
  });

  it('a key can be reused once its TTL has passed', async () => {
    const options = { queue: 'idem-ttl', idempotencyKey: 'short-lived', idempotencyTtlMs: 1000 };
    const first = await queue.enqueue('idem.ttl', { n: 1 }, options);
    expect(await queue.enqueue('idem.ttl', { n: 1 }, options)).toBe(first);
    const { rows } = await pool.query<{ ttl_ms: number }>(
      `SELECT (extract(epoch FROM expires_at - created_at) * 1000)::int AS ttl_ms
         FROM workhorse.enqueue_idempotency WHERE scope = 'idem-ttl'`,
    );
    expect(rows).toEqual([{ ttl_ms: 1000 }]);

    // Expiry is judged by the database clock: wait until it has really passed there.
    await waitFor(
      async () => {
        const r = await pool.query<{ expired: boolean }>(
          `SELECT expires_at <= clock_timestamp() AS expired FROM workhorse.enqueue_idempotency WHERE scope = 'idem-ttl'`,
        );
        return r.rows[0].expired;
      },
      5000,
      'the key to expire',
    );
    // A different payload is accepted too: an expired key holds nothing against a new request.
    const second = await queue.enqueue('idem.ttl', { n: 2 }, options);
    expect(second).not.toBe(first);
    expect(await admin.getJob(second)).toMatchObject({ payload: { n: 2 }, state: 'ready' });
    expect(await admin.getJob(first)).toMatchObject({ payload: { n: 1 } });
    const reservation = await pool.query('SELECT job_id FROM workhorse.enqueue_idempotency WHERE scope = $1', ['idem-ttl']);
    expect(reservation.rows).toEqual([{ job_id: second }]);
  });

  it('stores the key only as its SHA-256 hash', async () => {
    const key = 'customer-42/order-7/raw-secret-key';
    const id = await queue.enqueue('idem.hash', { n: 1 }, { queue: 'idem-hash', idempotencyKey: key });
    const { rows } = await pool.query<{ key_hash: Buffer; job_id: string; whole_row: string }>(
      `SELECT key_hash, job_id, i::text AS whole_row FROM workhorse.enqueue_idempotency i WHERE scope = 'idem-hash'`,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0].job_id).toBe(id);
    expect(rows[0].key_hash.equals(createHash('sha256').update(key, 'utf8').digest())).toBe(true);
    // No column (the request fingerprint included) holds the raw key.
    expect(rows[0].whole_row).not.toContain(key);
    expect(rows[0].whole_row).not.toContain('raw-secret');
  });

  it('rejects bad idempotency options before writing anything', async () => {
    const before = await countRows();
    const cases: [Record<string, unknown>, string][] = [
      [{ idempotencyScope: 'orders' }, 'idempotencyScope'],
      [{ idempotencyTtlMs: 5000 }, 'idempotencyTtlMs'],
      [{ idempotencyKey: '' }, 'idempotencyKey'],
      [{ idempotencyKey: 'k'.repeat(513) }, 'idempotencyKey'],
      [{ idempotencyKey: 'k', idempotencyTtlMs: 999 }, 'idempotencyTtlMs'],
      [{ idempotencyKey: 'k', idempotencyTtlMs: 2_592_000_001 }, 'idempotencyTtlMs'],
      [{ idempotencyKey: 'k', idempotencyTtlMs: 1500.5 }, 'idempotencyTtlMs'],
      [{ idempotencyKey: 'k', idempotencyScope: '' }, 'idempotencyScope'],
    ];
    for (const [options, field] of cases) {
      const error = await expectRejects(queue.enqueue('idem.bad', null, options), WorkhorseValidationError);
      expect(error).not.toBeInstanceOf(IdempotencyConflictError);
      expect(error.field).toBe(field);
    }

    // The SQL function refuses the same input from a client that skips the TypeScript checks.
    const sqlCases: [Record<string, unknown>, string][] = [
      [{ idempotencyScope: 'orders' }, 'requests[0].idempotencyScope'],
      [{ idempotencyTtlMs: 5000 }, 'requests[0].idempotencyTtlMs'],
      [{ idempotencyKey: '' }, 'requests[0].idempotencyKey'],
      [{ idempotencyKey: 'k', idempotencyTtlMs: 999 }, 'requests[0].idempotencyTtlMs'],
      [{ idempotencyKey: 'k', idempotencyTtlMs: 2_592_000_001 }, 'requests[0].idempotencyTtlMs'],
    ];
    for (const [options, column] of sqlCases) {
      const error = await pool
        .query('SELECT * FROM workhorse.enqueue_many_v1($1::jsonb)', [JSON.stringify([{ type: 'idem.bad', payload: null, ...options }])])
        .then(
          () => undefined,
          (e: { code?: string; column?: string }) => e,
        );
      expect(error).toMatchObject({ code: 'P1001', column });
    }
    expect(await countRows()).toEqual(before);
  });
});

describe('durable sleeps', () => {
  it('frees the slot while sleeping, then resumes the same attempt and replays checkpoints', async () => {
    const queueName = 'sleep-main';
    const invocations = new Map<string, number>();
    const seen: WorkerEvent[] = [];
    const worker = new Worker(queue, {
      queues: [queueName],
      concurrency: 1,
      leaseMs: 10_000,
      pollMs: 50,
      tickMs: 200,
      workerId: 'sleep-worker-main',
    });
    worker.on((event) => {
      seen.push(event);
    });
    const thrownFromSleep: unknown[] = [];
    worker.handle('durable.nap', async (_payload: null, ctx: HandlerContext) => {
      invocations.set(ctx.jobId, (invocations.get(ctx.jobId) ?? 0) + 1);
      const a = await ctx.checkpoint('a', async () => {
        await recordSideEffect(pool, ctx.jobId, 'a');
        return `a-run-${invocations.get(ctx.jobId)}`;
      });
      try {
        await ctx.sleep('nap', 1500);
      } catch (error) {
        thrownFromSleep.push(error);
        throw error;
      }
      const b = await ctx.checkpoint('b', async () => {
        await recordSideEffect(pool, ctx.jobId, 'b');
        return `b-run-${invocations.get(ctx.jobId)}`;
      });
      return { a, b, attempt: ctx.attempt };
    });
    worker.handle('durable.quick', async () => 'quick-done');
    startWorker(worker);

    const napId = await queue.enqueue('durable.nap', null, { queue: queueName, maxAttempts: 3 });
    const sleeping = await waitFor(
      () => seen.find((e): e is Extract<WorkerEvent, { name: 'job.sleeping' }> => e.name === 'job.sleeping' && e.jobId === napId),
      10_000,
      'the job.sleeping event',
    );
    const wakeAt = sleeping.wakeAt;
    expect(thrownFromSleep).toHaveLength(1);
    expect(thrownFromSleep[0]).toBeInstanceOf(JobSleeping);
    expect((thrownFromSleep[0] as JobSleeping).wakeAt.getTime()).toBe(wakeAt.getTime());

    const asleep = await admin.getJob(napId);
    expect(asleep).toMatchObject({ state: 'scheduled', currentAttempt: 1, workerId: null, leaseExpiresAt: null });
    expect(Math.abs((asleep?.runAt.getTime() ?? 0) - wakeAt.getTime())).toBeLessThanOrEqual(1);

    // The only slot is free: a job enqueued now runs to the end before the sleeper wakes.
    const quickId = await queue.enqueue('durable.quick', null, { queue: queueName });
    await waitForState(quickId, 'succeeded', 10_000);
    const quick = await admin.getJob(quickId);
    expect(quick?.result).toBe('quick-done');
    expect(quick?.finishedAt?.getTime()).toBeLessThan(wakeAt.getTime());
    expect(await events(napId).then((es) => es.map((e) => e.kind))).not.toContain('woke');

    await waitForState(napId, 'succeeded', 15_000);
    const done = await admin.getJob(napId);
    expect(done).toMatchObject({
      state: 'succeeded',
      currentAttempt: 1,
      // `a` is the value stored by the first run, replayed; `b` ran in the second run.
      result: { a: 'a-run-1', b: 'b-run-2', attempt: 1 },
    });
    expect(invocations.get(napId)).toBe(2);
    expect((await sideEffects(pool, napId)).map((e) => e.stage)).toEqual(['a', 'b']);
    // The sleep returned at once on the second run: it threw only the first time.
    expect(thrownFromSleep).toHaveLength(1);

    const attempts = await pool.query('SELECT attempt, outcome FROM workhorse.attempt_history WHERE job_id = $1', [napId]);
    expect(attempts.rows).toEqual([{ attempt: 1, outcome: 'succeeded' }]);

    const timeline = await events(napId);
    expect(timeline.map((e) => e.kind)).toEqual([
      'enqueued',
      'claimed',
      'checkpoint_saved',
      'sleeping',
      'woke',
      'claimed',
      'checkpoint_saved',
      'succeeded',
    ]);
    const sleepEvent = timeline[3];
    expect(sleepEvent.data).toMatchObject({ name: 'nap' });
    expect(Math.abs(new Date(String(sleepEvent.data?.wakeAt)).getTime() - wakeAt.getTime())).toBeLessThanOrEqual(1);
    // A relative sleep counts from the moment it was first reached.
    expect(Math.abs(wakeAt.getTime() - sleepEvent.at.getTime() - 1500)).toBeLessThanOrEqual(1);
    const claims = timeline.filter((e) => e.kind === 'claimed');
    expect(claims[0].data).toBeNull();
    expect(claims[1].data).toEqual({ resumed: true });
    expect(claims.map((e) => e.attempt)).toEqual([1, 1]);
    expect(BigInt(claims[1].fenceToken ?? '0')).toBeGreaterThan(BigInt(claims[0].fenceToken ?? '0'));
    expect(timeline[4].at.getTime()).toBeGreaterThanOrEqual(wakeAt.getTime());
    expect(timeline.every((e) => e.attempt === null || e.attempt <= 1)).toBe(true);

    const napEvents = seen.filter((e) => 'jobId' in e && e.jobId === napId).map((e) => e.name);
    expect(napEvents).toEqual(['job.claimed', 'job.sleeping', 'job.claimed', 'job.succeeded']);
  });

  it('a relative sleep keeps its first wake time when reached again', async () => {
    const queueName = 'sleep-sql';
    const workerId = 'sleep-sql-worker';
    const jobId = await queue.enqueue('durable.sql', null, { queue: queueName });
    const first = await claimOne(pool, queueName, { workerId, leaseMs: 30_000 });
    expect(first.jobId).toBe(jobId);
    // A first attempt has no sleeps behind it.
    expect(first.waits).toBeNull();

    const slept = await sqlSleep(jobId, workerId, first.fence, 'pause', null, 60_000);
    expect(slept.status).toBe('sleeping');
    const wake = slept.wake_at as Date;
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'scheduled', currentAttempt: 1 });

    // The protocol under test is what a second visit of the sleep answers, not waiting a minute:
    // make the job due early and promote it, as if the handler had been resumed.
    // (A worker of an earlier test in this file may tick and promote it first: either way it is ready.)
    await pool.query(`UPDATE workhorse.job_runtime SET run_at = clock_timestamp() WHERE job_id = $1`, [jobId]);
    await pool.query('SELECT workhorse.promote_v1(1000)');
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'ready', currentAttempt: 1 });
    const resumed = await claimOne(pool, queueName, { workerId, leaseMs: 30_000 });
    expect(resumed.jobId).toBe(jobId);
    expect(resumed.attempt).toBe(1);
    expect(resumed.waits).not.toBeNull();
    expect(new Date(resumed.waits?.pause ?? '').getTime()).toBe(wake.getTime());

    const again = await sqlSleep(jobId, workerId, resumed.fence, 'pause', null, 5_000);
    expect(again.status).toBe('sleeping');
    expect(again.wake_at?.getTime()).toBe(wake.getTime());
    const job = await admin.getJob(jobId);
    expect(job).toMatchObject({ state: 'scheduled', currentAttempt: 1 });
    expect(job?.runAt.getTime()).toBe(wake.getTime());
    const waits = await pool.query<{ name: string }>('SELECT name FROM workhorse.job_wait WHERE job_id = $1', [jobId]);
    expect(waits.rows).toEqual([{ name: 'pause' }]);

    const sleeps = (await events(jobId)).filter((e) => e.kind === 'sleeping');
    expect(sleeps).toHaveLength(2);
    expect(sleeps.map((e) => new Date(String(e.data?.wakeAt)).getTime())).toEqual([wake.getTime(), wake.getTime()]);
    await admin.cancel(jobId, { reason: 'test cleanup' });
  });

  it('a stale sleep (wrong fence) changes nothing and reports stale', async () => {
    const queueName = 'sleep-stale';
    const workerId = 'sleep-stale-worker';
    const jobId = await queue.enqueue('durable.stale', null, { queue: queueName });
    const claim = await claimOne(pool, queueName, { workerId, leaseMs: 30_000 });
    const eventsBefore = (await events(jobId)).length;

    const wrongFence = await sqlSleep(jobId, workerId, String(BigInt(claim.fence) + 1000n), 'pause', null, 60_000);
    expect(wrongFence).toEqual({ status: 'stale', wake_at: null });
    const wrongWorker = await sqlSleep(jobId, 'someone-else', claim.fence, 'pause', null, 60_000);
    expect(wrongWorker).toEqual({ status: 'stale', wake_at: null });

    expect(await admin.getJob(jobId)).toMatchObject({ state: 'active', workerId, currentAttempt: 1 });
    expect((await pool.query('SELECT 1 FROM workhorse.job_wait WHERE job_id = $1', [jobId])).rows).toHaveLength(0);
    expect(await events(jobId)).toHaveLength(eventsBefore);
    const completed = await pool.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status', [
      jobId,
      workerId,
      claim.fence,
      'null',
    ]);
    expect(completed.rows[0].status).toBe('succeeded');
  });

  it('sleepUntil a past date returns at once', async () => {
    const queueName = 'sleep-past';
    const worker = new Worker(queue, { queues: [queueName], concurrency: 1, leaseMs: 10_000, workerId: 'sleep-past-worker' });
    workers.push(worker);
    const past = new Date(Date.now() - 60_000);
    let calls = 0;
    worker.handle('durable.past', async (_payload: null, ctx: HandlerContext) => {
      calls += 1;
      await ctx.sleepUntil('deadline-gone', past);
      return { attempt: ctx.attempt };
    });
    const jobId = await queue.enqueue('durable.past', null, { queue: queueName });
    expect(await worker.runOnce()).toBe(1);

    expect(calls).toBe(1);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'succeeded', currentAttempt: 1, result: { attempt: 1 } });
    const kinds = (await events(jobId)).map((e) => e.kind);
    expect(kinds).toEqual(['enqueued', 'claimed', 'succeeded']);
  });

  it('survives the worker process being killed while the job sleeps', async () => {
    const queueName = 'sleep-crash';
    const jobId = await queue.enqueue('durable.nap', { sleepMs: 2000 }, { queue: queueName, maxAttempts: 3 });

    const child = children.start(FIXTURE, { SLEEP_DATABASE_URL: db.url, SLEEP_WORKER_ID: 'sleep-child', SLEEP_QUEUE: queueName });
    const proc = child.process;
    expect(await waitForLine(child, `SLEEPING ${jobId}`, 20_000)).toBe(`SLEEPING ${jobId}`);
    const childPid = proc.pid;
    proc.kill('SIGKILL');
    await child.exited;
    expect(proc.signalCode).toBe('SIGKILL');
    // The process died while the job slept: nothing of it was active or leased.
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'scheduled', currentAttempt: 1, workerId: null });

    const worker = new Worker(queue, {
      queues: [queueName],
      concurrency: 1,
      leaseMs: 10_000,
      pollMs: 50,
      tickMs: 200,
      workerId: 'sleep-survivor',
    });
    worker.handle('durable.nap', async (payload: { sleepMs: number }, ctx: HandlerContext) => {
      const a = await ctx.checkpoint('a', async () => {
        await recordSideEffect(pool, ctx.jobId, 'a');
        return `a-${process.pid}`;
      });
      await ctx.sleep('nap', payload.sleepMs);
      const b = await ctx.checkpoint('b', async () => {
        await recordSideEffect(pool, ctx.jobId, 'b');
        return `b-${process.pid}`;
      });
      return { a, b, attempt: ctx.attempt };
    });
    startWorker(worker);

    await waitForState(jobId, 'succeeded', 15_000);
    expect(await admin.getJob(jobId)).toMatchObject({
      state: 'succeeded',
      currentAttempt: 1,
      result: { a: `a-${childPid}`, b: `b-${process.pid}`, attempt: 1 },
    });
    expect(await sideEffects(pool, jobId)).toEqual([
      { stage: 'a', pid: childPid },
      { stage: 'b', pid: process.pid },
    ]);
    const attempts = await pool.query('SELECT attempt, outcome, worker_id FROM workhorse.attempt_history WHERE job_id = $1', [jobId]);
    expect(attempts.rows).toEqual([{ attempt: 1, outcome: 'succeeded', worker_id: 'sleep-survivor' }]);
    const timeline = await events(jobId);
    expect(timeline.map((e) => e.kind)).toEqual([
      'enqueued',
      'claimed',
      'checkpoint_saved',
      'sleeping',
      'woke',
      'claimed',
      'checkpoint_saved',
      'succeeded',
    ]);
    expect(timeline.filter((e) => e.kind === 'claimed').map((e) => [e.workerId, e.data])).toEqual([
      ['sleep-child', null],
      ['sleep-survivor', { resumed: true }],
    ]);
  });
});

describe('checkpoint names', () => {
  // A job's stored checkpoints reach the handler as a plain object: names that are
  // also properties of every object must not read those properties (or, for __proto__, replace
  // the object's prototype) instead of the job's own entries.
  it('names like constructor, toString and __proto__ run once and replay like any other', async () => {
    const q = 'checkpoint-names';
    const names = ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'plain'];
    const runsOf = new Map<string, number>();
    const returned: [string, unknown][][] = [];
    const worker = (): Worker =>
      new Worker(queue, { queues: [q], concurrency: 1 }).handle('names.job', async (_payload: null, ctx: HandlerContext) => {
        const values: [string, unknown][] = [];
        for (const name of names) {
          const value = await ctx.checkpoint(name, () => {
            runsOf.set(name, (runsOf.get(name) ?? 0) + 1);
            return { stage: name, attempt: ctx.attempt };
          });
          values.push([name, value]);
        }
        returned.push(values);
        if (ctx.attempt === 1) throw new Error('fail once, so the second attempt replays');
        return null;
      });
    const id = await queue.enqueue('names.job', null, { queue: q, maxAttempts: 2, retryPolicy: { kind: 'fixed', delayMs: 0 } });
    expect(await worker().runOnce()).toBe(1);
    expect(await worker().runOnce()).toBe(1);

    expect((await admin.getJob(id))?.state).toBe('succeeded');
    // The first attempt ran each stage; the second got every stored value back.
    const expected = names.map((n) => [n, { stage: n, attempt: 1 }]);
    expect(returned).toEqual([expected, expected]);
    expect([...runsOf]).toEqual(names.map((n) => [n, 1]));
  });

  // A name the database cannot store as given: a lone surrogate would be stored as U+FFFD (and
  // never match the name again, so the stage ran on every attempt), a NUL refused by the
  // server only after the stage ran.
  it.each([
    ['a lone surrogate', 'stage-\ud800'],
    ['a NUL character', 'stage-\u0000'],
  ])('a name with %s is refused with a typed error before the stage runs', async (_label, name) => {
    const q = `checkpoint-bad-name-${name.charCodeAt(6)}`;
    let ran = 0;
    let refused: unknown;
    const worker = new Worker(queue, { queues: [q] }).handle('bad-name.job', async (_payload: null, ctx: HandlerContext) => {
      try {
        await ctx.checkpoint(name, () => ++ran);
      } catch (error) {
        refused = error;
      }
      return null;
    });
    await queue.enqueue('bad-name.job', null, { queue: q });
    expect(await worker.runOnce()).toBe(1);
    expect(refused).toBeInstanceOf(WorkhorseValidationError);
    expect((refused as WorkhorseValidationError).field).toBe('name');
    expect(ran).toBe(0);
    expect(await pool.query('SELECT 1 FROM workhorse.job_checkpoint k JOIN workhorse.job j ON j.id = k.job_id WHERE j.queue = $1', [q])).toMatchObject({ rowCount: 0 });
  });

  it('a sleep name with a lone surrogate is refused with a typed error before anything is written', async () => {
    const q = 'sleep-bad-name';
    let refused: unknown;
    const worker = new Worker(queue, { queues: [q] }).handle('bad-sleep.job', async (_payload: null, ctx: HandlerContext) => {
      await ctx.sleep('nap-\udfff', 60_000).catch((error: unknown) => (refused = error));
      return null;
    });
    const id = await queue.enqueue('bad-sleep.job', null, { queue: q });
    expect(await worker.runOnce()).toBe(1);
    expect(refused).toBeInstanceOf(WorkhorseValidationError);
    expect(await pool.query('SELECT 1 FROM workhorse.job_wait WHERE job_id = $1', [id])).toMatchObject({ rowCount: 0 });
    expect((await admin.getJob(id))?.state).toBe('succeeded');
  });
});

describe('concurrent checkpoints of one name', () => {
  it('in one handler, both callers get the one stored value and the stage runs once', async () => {
    const q = 'checkpoint-concurrent';
    let ran = 0;
    let values: unknown[] = [];
    const worker = new Worker(queue, { queues: [q] }).handle('twin.job', async (_payload: null, ctx: HandlerContext) => {
      const stage = async (tag: string) => {
        ran++;
        await new Promise((resolve) => setTimeout(resolve, 20));
        return { tag, dropped: undefined };
      };
      values = await Promise.all([ctx.checkpoint('charge', () => stage('first')), ctx.checkpoint('charge', () => stage('second'))]);
      return values;
    });
    const id = await queue.enqueue('twin.job', null, { queue: q });
    expect(await worker.runOnce()).toBe(1);
    const { rows } = await pool.query<{ value: unknown }>('SELECT value FROM workhorse.job_checkpoint WHERE job_id = $1', [id]);
    expect(rows).toEqual([{ value: { tag: 'first' } }]);
    expect(ran).toBe(1);
    // Exactly the stored value (as a replay returns it), for both callers.
    expect(values).toStrictEqual([{ tag: 'first' }, { tag: 'first' }]);
    expect((await admin.getJob(id))?.result).toEqual([{ tag: 'first' }, { tag: 'first' }]);
  });

  it('a value stored first by another run wins over this run\'s own', async () => {
    const q = 'checkpoint-raced';
    let value: unknown;
    const worker = new Worker(queue, { queues: [q] }).handle('raced.job', async (_payload: null, ctx: HandlerContext) => {
      value = await ctx.checkpoint('charge', async () => {
        // Meanwhile, another run of this job (a worker that has just lost it) stores its value.
        await pool.query(
          `INSERT INTO workhorse.job_checkpoint (job_id, name, value, attempt, fence_token, worker_id, created_at)
           VALUES ($1, 'charge', '{"by": "the other run"}', 1, 1, 'other', now())`,
          [ctx.jobId],
        );
        return { by: 'this run' };
      });
      return value;
    });
    const id = await queue.enqueue('raced.job', null, { queue: q });
    expect(await worker.runOnce()).toBe(1);
    expect(value).toEqual({ by: 'the other run' });
    expect((await admin.getJob(id))?.result).toEqual({ by: 'the other run' });
  });
});
