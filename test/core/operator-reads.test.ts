/**
 * The operator reads the dashboard relies on: listJobs bounded by creation time and by how many
 * jobs a page may examine (every match found exactly once across pages, a bounded page when
 * matches are rare), finished jobs per queue and time bucket, and a job's checkpoints.
 */
import { WorkhorseValidationError, type JobSnapshot, type ListJobsFilter } from '../../lib/core';
import { freshQueue } from '../support/db';
import { claim, claimOne, complete, fail } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

const { db, queue, admin } = useTestDatabase();

const BOUND = "SELECT date_trunc('milliseconds', clock_timestamp()) + interval '1 millisecond' AS now, pg_sleep(0.002)";

/** Every job of a listing, page by page, and the sizes of the pages. */
async function readAll(filter: ListJobsFilter): Promise<{ ids: string[]; pages: number[] }> {
  const ids: string[] = [];
  const pages: number[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await admin.listJobs({ ...filter, cursor });
    ids.push(...page.items.map((job: JobSnapshot) => job.id));
    pages.push(page.items.length);
    if (page.nextCursor === null) return { ids, pages };
    cursor = page.nextCursor;
  }
}

describe('listJobs with createdAfter and createdBefore', () => {
  it('lists exactly the jobs created in the window, newest first, across pages', async () => {
    const q = freshQueue();
    const before = await queue.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ type: 'window.job', payload: { i }, queue: q })));
    // A JS Date holds milliseconds: each bound is the next millisecond, and 2 ms pass after it, so
    // no job shares a millisecond with a bound.
    const bound = async () => (await db.pool.query<{ now: Date }>(BOUND)).rows[0].now;
    const from = await bound();
    const inside: string[] = [];
    for (let i = 0; i < 5; i += 1) inside.push(await queue.enqueue('window.job', { i }, { queue: q }));
    await db.pool.query('SELECT pg_sleep(0.002)');
    const until = await bound();
    const after = await queue.enqueue('window.job', {}, { queue: q });

    const listed = await readAll({ queue: q, createdAfter: from, createdBefore: until, limit: 2 });
    expect(listed.ids).toEqual([...inside].reverse());
    expect(listed.pages).toEqual([2, 2, 1]);
    expect((await readAll({ queue: q, createdBefore: from })).ids).toEqual([...before].reverse());
    expect((await readAll({ queue: q, createdAfter: until })).ids).toEqual([after]);
    expect((await readAll({ createdAfter: new Date(Date.now() + 3_600_000) })).ids).toEqual([]);
  });

  it('refuses a bad time or scan limit with a typed error naming it', async () => {
    const bad = [
      [{ createdAfter: new Date('nope') }, 'createdAfter'],
      [{ createdBefore: '2026-01-01' as unknown as Date }, 'createdBefore'],
      [{ scanLimit: 0 }, 'scanLimit'],
      [{ scanLimit: 1_000_001 }, 'scanLimit'],
      [{ scanned: 5 } as ListJobsFilter, 'scanned'],
    ] as const;
    for (const [filter, field] of bad) {
      const error = await admin.listJobs(filter as ListJobsFilter).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkhorseValidationError);
      expect((error as WorkhorseValidationError).field).toBe(field);
    }
  });
});

describe('listJobs with scanLimit', () => {
  it('examines at most scanLimit jobs per page, and the pages together find every match once', async () => {
    const q = freshQueue();
    const ids = await queue.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ type: i % 7 === 0 ? 'rare.job' : 'common.job', payload: { i }, queue: q })));
    // Jobs 0, 7, 14, 21 and 28 fail; the others stay ready.
    const failing = ids.filter((_, i) => i % 7 === 0);
    for (const owner of await claim(db.pool, q, { limit: 30 })) {
      if (failing.includes(owner.jobId)) await fail(db.pool, owner, { name: 'Boom', message: 'no' }, { nonRetryable: true });
      else await complete(db.pool, owner, { ok: true });
    }

    const first = await admin.listJobs({ queue: q, states: ['failed'], scanLimit: 10, limit: 50 });
    // The 10 newest jobs hold two failures (28 and 21); the page stops there and says where to go on.
    expect(first.items.map((job) => job.id)).toEqual([ids[28], ids[21]]);
    expect(first.nextCursor).not.toBeNull();

    const all = await readAll({ queue: q, states: ['failed'], scanLimit: 10, limit: 50 });
    expect(all.ids).toEqual([...failing].reverse());
    // Jobs 29-20 hold two failures, 19-10 one, 9-0 two; the walk of 9-0 sees that nothing is left.
    expect(all.pages).toEqual([2, 1, 2]);

    // The type filter with a queue is applied after the walk, as the states are.
    expect((await readAll({ queue: q, type: 'rare.job', scanLimit: 4, limit: 2 })).ids).toEqual([...failing].reverse());
    // Without a bound, the same filter fills its pages; a page that exactly ends the listing has no cursor.
    const unbounded = await readAll({ queue: q, states: ['failed'], limit: 5 });
    expect(unbounded).toEqual({ ids: [...failing].reverse(), pages: [5] });
  });

  it('a full page whose walk ended has no next cursor, and one with more matches has', async () => {
    const q = freshQueue();
    const ids = await queue.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ type: 'exact.job', payload: { i }, queue: q })));
    expect(await admin.listJobs({ queue: q, limit: 4, scanLimit: 100 })).toEqual({ items: expect.any(Array), nextCursor: null });
    const page = await admin.listJobs({ queue: q, limit: 3, scanLimit: 100 });
    expect(page.items.map((job) => job.id)).toEqual([ids[3], ids[2], ids[1]]);
    const last = await admin.listJobs({ queue: q, limit: 3, scanLimit: 100, cursor: page.nextCursor ?? undefined });
    expect(last).toEqual({ items: [expect.objectContaining({ id: ids[0] })], nextCursor: null });
  });
});

describe('queueActivity', () => {
  it('counts finished jobs per queue and bucket by terminal state', async () => {
    const [a, b] = [freshQueue(), freshQueue()];
    const since = new Date(Date.now() - 60_000);
    await queue.enqueueMany([
      ...Array.from({ length: 3 }, () => ({ type: 'activity.job', payload: null, queue: a })),
      ...Array.from({ length: 2 }, () => ({ type: 'activity.job', payload: null, queue: b })),
    ]);
    const toCancel = await queue.enqueue('activity.job', null, { queue: b, runAt: new Date(Date.now() + 60_000) });
    await admin.cancel(toCancel);
    const claimed = await claim(db.pool, [a, b], { limit: 5 });
    for (const [i, owner] of claimed.entries()) {
      if (i === 0) await fail(db.pool, owner, { name: 'Boom', message: 'no' }, { nonRetryable: true });
      else await complete(db.pool, owner, null);
    }
    const rows = (await admin.queueActivity({ since, bucketSeconds: 3600 })).filter((row) => row.queue === a || row.queue === b);
    const totals = (name: string) =>
      rows.filter((row) => row.queue === name).reduce((t, r) => ({ succeeded: t.succeeded + r.succeeded, failed: t.failed + r.failed, canceled: t.canceled + r.canceled }), { succeeded: 0, failed: 0, canceled: 0 });
    const failedQueue = claimed[0].queue;
    expect(totals(a).succeeded + totals(b).succeeded).toBe(4);
    expect(totals(failedQueue).failed).toBe(1);
    expect(totals(b).canceled).toBe(1);
    for (const row of rows) {
      expect(row.bucket.getTime()).toBeGreaterThanOrEqual(since.getTime());
      expect((row.bucket.getTime() - since.getTime()) % 3_600_000).toBe(0);
    }
    expect(await admin.queueActivity({ since: new Date(Date.now() + 1000), bucketSeconds: 60 })).toEqual([]);
  });

  it('refuses a window it cannot read cheaply, naming the field', async () => {
    const cases = [
      [{ since: new Date(Date.now() - 40 * 86_400_000), bucketSeconds: 60 }, 'since'],
      [{ since: new Date('x'), bucketSeconds: 60 }, 'since'],
      [{ since: new Date(), bucketSeconds: 0 }, 'bucketSeconds'],
      [{ since: new Date(), bucketSeconds: 86_401 }, 'bucketSeconds'],
    ] as const;
    for (const [options, field] of cases) {
      const error = await admin.queueActivity(options).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkhorseValidationError);
      expect((error as WorkhorseValidationError).field).toBe(field);
    }
  });
});

describe('listCheckpoints', () => {
  it('returns the saved checkpoints with their values, oldest first', async () => {
    const q = freshQueue();
    const id = await queue.enqueue('checkpoint.job', null, { queue: q });
    const owner = await claimOne(db.pool, q, { workerId: 'cp-worker' });
    for (const [name, value] of [['charge', { chargeId: 'ch_1' }], ['label', 'lb_2']] as const) {
      await db.pool.query('SELECT workhorse.save_checkpoint_v1($1, $2, $3, $4, $5::jsonb)', [id, owner.workerId, owner.fence, name, JSON.stringify(value)]);
    }
    const entries = await admin.listCheckpoints(id);
    expect(entries).toEqual([
      { name: 'charge', value: { chargeId: 'ch_1' }, attempt: 1, workerId: 'cp-worker', createdAt: expect.any(Date) },
      { name: 'label', value: 'lb_2', attempt: 1, workerId: 'cp-worker', createdAt: expect.any(Date) },
    ]);
    await complete(db.pool, owner, null);
    expect(await admin.listCheckpoints('00000000-0000-4000-8000-000000000000')).toEqual([]);
  });
});
