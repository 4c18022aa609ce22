/**
 * Per-key concurrency, one process: the enqueue option `concurrencyKey`, the queue policy
 * `perKey`, their input checks (in SQL), and what the claim gives: at most n active jobs per key
 * while other keys and jobs without a key flow, whatever ends or parks an active job. The
 * multi-process guarantee is in per-key-concurrency-workers.test.ts.
 */
import { fromPgError, WorkhorseValidationError, type QueuePolicy } from '../../lib/core';
import { claim, complete, fail, forceExpire, type ClaimedJob } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

const { db, queue, admin } = useTestDatabase();

async function enqueueKeyed(q: string, key: string | undefined, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await queue.enqueue('perkey.job', { key, i }, { queue: q, ...(key === undefined ? {} : { concurrencyKey: key }) }));
  return ids;
}

async function validationField(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    return (error as WorkhorseValidationError).field;
  }
  throw new Error('expected a WorkhorseValidationError');
}

/** How many of the queue's active jobs each key has (the unkeyed under ''). */
async function activeByKey(q: string): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ key: string; n: number }>(
    "SELECT coalesce(concurrency_key, '') AS key, count(*)::int AS n FROM workhorse.job_runtime WHERE queue = $1 AND state = 'active' GROUP BY 1 ORDER BY 1",
    [q],
  );
  return Object.fromEntries(rows.map((r) => [r.key, r.n]));
}

const keysOf = (jobs: ClaimedJob[]): string[] => jobs.map((j) => (j.payload as { key?: string }).key ?? '').sort();

describe('concurrencyKey and the perKey policy', () => {
  it('stores the key with the job, shown in its snapshot', async () => {
    const [keyed] = await enqueueKeyed('pk-snapshot', 'tenant-1', 1);
    const [plain] = await enqueueKeyed('pk-snapshot', undefined, 1);
    expect((await admin.getJob(keyed))?.concurrencyKey).toBe('tenant-1');
    expect((await admin.getJob(plain))?.concurrencyKey).toBeNull();
  });

  it.each<[string, unknown]>([
    ['an empty key', ''],
    ['a key of 257 characters', 'k'.repeat(257)],
    ['a key that is a number', 7],
  ])('refuses %s on enqueue, naming concurrencyKey, writing nothing', async (_what, key) => {
    expect(await validationField(() => queue.enqueue('perkey.job', {}, { queue: 'pk-bad', concurrencyKey: key as string }))).toBe('concurrencyKey');
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM workhorse.job WHERE queue = 'pk-bad'");
    expect(rows[0].n).toBe(0);
  });

  it('keeps the key on a redriven copy of a dead letter', async () => {
    const [id] = await enqueueKeyed('pk-redrive', 'tenant-9', 1);
    const [job] = await claim(db.pool, 'pk-redrive');
    expect((await fail(db.pool, job, { name: 'E', message: 'x' }, { nonRetryable: true })).status).toBe('failed');
    const copy = await admin.redrive(id, { requestId: 'pk-redrive-1' });
    expect((await admin.getJob(copy))?.concurrencyKey).toBe('tenant-9');
  });

  it('accepts a key of 256 characters', async () => {
    const id = await queue.enqueue('perkey.job', {}, { queue: 'pk-long', concurrencyKey: 'k'.repeat(256) });
    expect((await admin.getJob(id))?.concurrencyKey).toHaveLength(256);
  });

  it('sets, shows, replaces and removes a per-key limit', async () => {
    const info = await admin.setQueuePolicy('pk-policy', { perKey: { concurrency: 2 } }, { actor: 'ops' });
    expect(info).toMatchObject({ queue: 'pk-policy', concurrency: null, rateLimit: null, perKey: { concurrency: 2 } });
    expect((await admin.listQueues()).find((q) => q.queue === 'pk-policy')).toEqual(info);
    expect(await admin.setQueuePolicy('pk-policy', { concurrency: 5, perKey: { concurrency: 1 } })).toMatchObject({ concurrency: 5, perKey: { concurrency: 1 } });
    expect(await admin.setQueuePolicy('pk-policy', { concurrency: 5 })).toMatchObject({ concurrency: 5, perKey: null });
    expect(await admin.setQueuePolicy('pk-policy', null)).toMatchObject({ perKey: null, concurrency: null });
    const { rows } = await db.pool.query("SELECT detail FROM workhorse.operator_change WHERE subject = 'pk-policy' ORDER BY id");
    expect(rows.map((r) => r.detail.perKey)).toEqual([{ concurrency: 2 }, { concurrency: 1 }, null, null]);
  });

  it.each<[string, unknown, string]>([
    ['a zero per-key concurrency', { perKey: { concurrency: 0 } }, 'perKey.concurrency'],
    ['a per-key concurrency over 100000', { perKey: { concurrency: 100_001 } }, 'perKey.concurrency'],
    ['a fractional per-key concurrency', { perKey: { concurrency: 1.5 } }, 'perKey.concurrency'],
    ['a NaN per-key concurrency', { perKey: { concurrency: Number.NaN } }, 'perKey.concurrency'],
    ['a per-key limit that is a number', { perKey: 3 }, 'perKey'],
    ['a per-key limit without its concurrency', { perKey: {} }, 'perKey.concurrency'],
    ['an unknown per-key field', { perKey: { concurrency: 1, rate: 2 } }, 'perKey.rate'],
  ])('refuses %s in SQL with a typed error naming the field, writing nothing', async (_what, policy, field) => {
    expect(await validationField(() => admin.setQueuePolicy('pk-policy-bad', policy as QueuePolicy))).toBe(field);
    // The same answer straight from set_queue_policy_v1 (the rule lives there, not in the client).
    expect(
      await validationField(() =>
        db.pool
          .query('SELECT workhorse.set_queue_policy_v1($1, $2::jsonb)', ['pk-policy-bad', JSON.stringify(policy, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v))])
          .catch((e: unknown) => {
            throw fromPgError(e);
          }),
      ),
    ).toBe(field);
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM workhorse.queue_policy WHERE queue = 'pk-policy-bad'");
    expect(rows[0].n).toBe(0);
  });
});

describe('claims from a queue with a per-key limit', () => {
  it('gives at most n active jobs per key, while other keys and jobs without a key flow', async () => {
    const q = 'pk-claim';
    await enqueueKeyed(q, 'a', 5);
    await enqueueKeyed(q, 'b', 5);
    await enqueueKeyed(q, undefined, 3);
    await enqueueKeyed(q, 'c', 1);
    await admin.setQueuePolicy(q, { perKey: { concurrency: 2 } });
    const first = await claim(db.pool, q, { limit: 20 });
    expect(keysOf(first)).toEqual(['', '', '', 'a', 'a', 'b', 'b', 'c']);
    expect(await claim(db.pool, q, { limit: 20 })).toHaveLength(0);
    // Within a key, FIFO: a's first two jobs.
    expect(first.filter((j) => (j.payload as { key?: string }).key === 'a').map((j) => (j.payload as { i: number }).i).sort()).toEqual([0, 1]);
    await complete(db.pool, first.find((j) => (j.payload as { key?: string }).key === 'a')!);
    const next = await claim(db.pool, q, { limit: 20 });
    expect(keysOf(next)).toEqual(['a']);
    expect(await activeByKey(q)).toEqual({ '': 3, a: 2, b: 2, c: 1 });
  });

  it('without a per-key limit, a key limits nothing', async () => {
    const q = 'pk-unlimited';
    await enqueueKeyed(q, 'a', 4);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(4);
    const q2 = 'pk-queue-only';
    await enqueueKeyed(q2, 'a', 4);
    await admin.setQueuePolicy(q2, { concurrency: 3 });
    expect(await claim(db.pool, q2, { limit: 10 })).toHaveLength(3);
  });

  it('applies the queue concurrency and the per-key limit together', async () => {
    const q = 'pk-both';
    await enqueueKeyed(q, 'a', 3);
    await enqueueKeyed(q, 'b', 3);
    await enqueueKeyed(q, 'c', 3);
    await admin.setQueuePolicy(q, { concurrency: 4, perKey: { concurrency: 2 } });
    const claimed = await claim(db.pool, q, { limit: 10 });
    expect(claimed).toHaveLength(4);
    const counts = await activeByKey(q);
    expect(Math.max(...Object.values(counts))).toBeLessThanOrEqual(2);
  });

  it('lets the keys take turns across claims, from where the last claim stopped', async () => {
    const q = 'pk-turns';
    for (const key of ['a', 'b', 'c', 'd']) await enqueueKeyed(q, key, 3);
    await admin.setQueuePolicy(q, { perKey: { concurrency: 10 } });
    const order: string[] = [];
    for (let i = 0; i < 4; i++) order.push(...keysOf(await claim(db.pool, q, { limit: 2 })));
    // Two keys a claim, each giving its free slots up to the claim's limit: a, b, c, d, then a again.
    expect(order.slice(0, 4)).toEqual(['a', 'a', 'b', 'b']);
    expect(new Set(order)).toEqual(new Set(['a', 'b', 'c', 'd']));
  });

  it('goes on past many saturated keys: a claim that stops at its bound of visits moves the cursor', async () => {
    const q = 'pk-saturated';
    // 1,100 keys with one active job each (saturated at 1), then one key with a ready job.
    await db.pool.query(
      `WITH s AS (SELECT 'sat-' || lpad(g::text, 5, '0') AS key, workhorse.new_job_id() AS id, nextval('workhorse.job_seq') AS seq
                  FROM generate_series(1, 1100) AS g),
       j AS (INSERT INTO workhorse.job (id, queue, type, payload, priority, max_attempts, tags, run_at, created_at, seq, concurrency_key)
             SELECT id, $1, 'perkey.job', '{}', 0, 25, '{}', clock_timestamp(), clock_timestamp(), seq, key FROM s),
       q AS (INSERT INTO workhorse.job_query (seq, job_id, queue, type, created_at) SELECT seq, id, $1, 'perkey.job', clock_timestamp() FROM s)
       INSERT INTO workhorse.job_runtime (job_id, queue, priority, state, seq, run_at, max_attempts, concurrency_key)
       SELECT id, $1, 0, 'ready', seq, clock_timestamp(), 25, key FROM s`,
      [q],
    );
    expect(await claim(db.pool, q, { limit: 1000 })).toHaveLength(1000);
    expect(await claim(db.pool, q, { limit: 1000 })).toHaveLength(100);
    // Each saturated key gets a second ready job; one more key has one after them all.
    await enqueueKeyed(q, 'zz-free', 1);
    for (let i = 1; i <= 1100; i += 100) {
      await queue.enqueueMany(Array.from({ length: 100 }, (_, k) => ({ type: 'perkey.job', payload: {}, queue: q, concurrencyKey: `sat-${String(i + k).padStart(5, '0')}` })));
    }
    await admin.setQueuePolicy(q, { perKey: { concurrency: 1 } });
    // At most limit + 1000 keys a claim: the first claim may stop among the saturated keys; the
    // ones after it go on from there and reach the free key.
    const got: string[] = [];
    for (let i = 0; i < 3 && got.length === 0; i++) got.push(...keysOf(await claim(db.pool, q, { limit: 1 })));
    expect(got).toEqual(['zz-free']);
  });

  it('gives nothing while the queue is paused', async () => {
    const q = 'pk-paused';
    await enqueueKeyed(q, 'a', 2);
    await enqueueKeyed(q, undefined, 2);
    await admin.setQueuePolicy(q, { perKey: { concurrency: 1 } });
    await admin.pauseQueue(q);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(0);
    await admin.resumeQueue(q);
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(3);
  });

  it('skips a ready job another transaction holds, without waiting', async () => {
    const q = 'pk-held';
    const [held] = await enqueueKeyed(q, 'a', 1);
    await enqueueKeyed(q, 'b', 1);
    await admin.setQueuePolicy(q, { perKey: { concurrency: 1 } });
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM workhorse.job_runtime WHERE job_id = $1 FOR UPDATE', [held]);
      expect(keysOf(await claim(db.pool, q, { limit: 10 }))).toEqual(['b']);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    expect(keysOf(await claim(db.pool, q, { limit: 10 }))).toEqual(['a']);
  });
});

describe('every way an active job ends or is parked frees its key', () => {
  type Ending = (job: ClaimedJob) => Promise<void>;
  const cases: [string, Ending][] = [
    ['complete', async (job) => void expect(await complete(db.pool, job)).toBe('succeeded')],
    ['fail with a retry', async (job) => void expect((await fail(db.pool, job, { name: 'E', message: 'x' }, { retryDelayMs: 0 })).status).toBe('retry_scheduled')],
    ['fail for good', async (job) => void expect((await fail(db.pool, job, { name: 'E', message: 'x' }, { nonRetryable: true })).status).toBe('failed')],
    ['cancel, acknowledged by the worker', async (job) => {
      expect(await admin.cancel(job.jobId)).toBe('cancel_requested');
      const { rows } = await db.pool.query('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3) AS s', [job.jobId, job.workerId, job.fence]);
      expect(rows[0].s).toBe('canceled');
    }],
    ['lease expiry, recovered', async (job) => {
      await forceExpire(db.pool, job.jobId);
      await db.pool.query('SELECT * FROM workhorse.recover_expired_v1()');
    }],
    ['release by the worker', async (job) => {
      const { rows } = await db.pool.query('SELECT workhorse.release_v1($1, $2, $3, 0) AS s', [job.jobId, job.workerId, job.fence]);
      expect(rows[0].s).toBe('released');
    }],
    ['a durable sleep', async (job) => {
      const { rows } = await db.pool.query('SELECT * FROM workhorse.sleep_v1($1, $2, $3, $4, NULL, $5)', [job.jobId, job.workerId, job.fence, 'nap', 3_600_000]);
      expect(rows[0].status).toBe('sleeping');
    }],
    ['a wait for a signal', async (job) => {
      const { rows } = await db.pool.query('SELECT * FROM workhorse.wait_signal_v1($1, $2, $3, $4, 1, $5)', [job.jobId, job.workerId, job.fence, 'go', 3_600_000]);
      expect(rows[0].status).toBe('waiting');
    }],
  ];

  it.each(cases)('%s', async (_what, end) => {
    const q = `pk-end-${_what.replace(/[^a-z]+/g, '-')}`;
    await enqueueKeyed(q, 'k', 3);
    await admin.setQueuePolicy(q, { perKey: { concurrency: 1 } });
    const [first] = await claim(db.pool, q, { limit: 10 });
    expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(0);
    await end(first);
    const next = await claim(db.pool, q, { limit: 10 });
    expect(next).toHaveLength(1);
    expect(await activeByKey(q)).toEqual({ k: 1 });
  });
});
