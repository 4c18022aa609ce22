/**
 * Operator reads: getJob on both sides of the runtime/outcome split, the paged timeline, and
 * listJobs filters and keyset paging.
 */
import { randomUUID } from 'node:crypto';
import { Admin, InvalidCursorError, WorkhorseValidationError, type JobLineage, type JobSnapshot, type JobState, type TimelineEntry } from '../../lib/core';
import { claim, claimOne, complete, fail, type ClaimedJob } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

const { db, queue, admin } = useTestDatabase();

const WORKER = 'admin-test-worker';

describe('getJob', () => {
  it('reports each state, from whichever side of the split holds the job', async () => {
    const q = 'get-job';
    const retryPolicy = { kind: 'fixed', delayMs: 500 } as const;

    const readyId = await queue.enqueue('report.build', { month: '2024-05' }, { queue: q, priority: 7, maxAttempts: 4, retryPolicy, tags: ['finance', 'monthly'] });
    const ready = await admin.getJob(readyId);
    expect(ready).toEqual<JobSnapshot & JobLineage>({
      id: readyId,
      dependencies: [],
      waitingOn: [],
      parentId: null,
      children: [],
      queue: q,
      type: 'report.build',
      payload: { month: '2024-05' },
      priority: 7,
      state: 'ready',
      currentAttempt: 0,
      maxAttempts: 4,
      retryPolicy: { kind: 'fixed', delayMs: 500 },
      tags: ['finance', 'monthly'],
      runAt: expect.any(Date),
      createdAt: expect.any(Date),
      finishedAt: null,
      result: null,
      error: null,
      workerId: null,
      leaseExpiresAt: null,
      cancelRequestedAt: null,
      progress: null,
      redrivenFrom: null,
      redrivenTo: [],
      deadline: null,
      executionTimeoutMs: null,
      concurrencyKey: null,
    });
    expect(ready?.runAt.getTime()).toBeGreaterThanOrEqual(ready?.createdAt.getTime() ?? Infinity);

    const runAt = new Date(Date.now() + 3_600_000);
    const scheduledId = await queue.enqueue('report.build', null, { queue: `${q}-later`, runAt });
    const scheduled = await admin.getJob(scheduledId);
    expect(scheduled).toMatchObject({ state: 'scheduled', currentAttempt: 0, workerId: null, finishedAt: null });
    expect(scheduled?.runAt.getTime()).toBe(runAt.getTime());

    const claimed = await claimOne(db.pool, q, { workerId: WORKER });
    expect(claimed.jobId).toBe(readyId);
    const active = await admin.getJob(readyId);
    expect(active).toMatchObject({ state: 'active', currentAttempt: 1, workerId: WORKER, finishedAt: null, result: null, cancelRequestedAt: null });
    expect(active?.leaseExpiresAt).toEqual(claimed.leaseExpiresAt);

    expect(await complete(db.pool, claimed, { rows: 31, file: 'may.csv' })).toBe('succeeded');
    const succeeded = await admin.getJob(readyId);
    expect(succeeded).toMatchObject({
      state: 'succeeded',
      currentAttempt: 1,
      result: { rows: 31, file: 'may.csv' },
      error: null,
      workerId: null,
      leaseExpiresAt: null,
      // The definition survives the end of the job.
      payload: { month: '2024-05' },
      priority: 7,
      tags: ['finance', 'monthly'],
    });
    expect(succeeded?.finishedAt).toBeInstanceOf(Date);

    const failingId = await queue.enqueue('report.build', null, { queue: q, maxAttempts: 3 });
    const failing = await claimOne(db.pool, q, { workerId: WORKER });
    // While a retry waits, the snapshot shows the last attempt's error.
    expect((await fail(db.pool, failing, { name: 'Timeout', message: 'upstream slow' }, { retryDelayMs: 60_000 })).status).toBe('retry_scheduled');
    expect(await admin.getJob(failingId)).toMatchObject({
      state: 'scheduled',
      currentAttempt: 1,
      error: { name: 'Timeout', message: 'upstream slow' },
    });
    await db.pool.query('UPDATE workhorse.job_runtime SET run_at = clock_timestamp() WHERE job_id = $1', [failingId]);
    await db.pool.query('SELECT workhorse.promote_v1()');
    const failingAgain = await claimOne(db.pool, q, { workerId: WORKER });
    const error = { name: 'BadData', message: 'column 3 is not a number' };
    expect((await fail(db.pool, failingAgain, error, { nonRetryable: true })).status).toBe('failed');
    const failed = await admin.getJob(failingId);
    expect(failed).toMatchObject({ state: 'failed', currentAttempt: 2, maxAttempts: 3, result: null, error, workerId: null });
    expect(failed?.finishedAt).toBeInstanceOf(Date);

    expect(await admin.cancel(scheduledId, { reason: 'not needed' })).toBe('canceled');
    const canceled = await admin.getJob(scheduledId);
    expect(canceled).toMatchObject({ state: 'canceled', result: null, error: { name: 'Canceled', message: 'not needed' } });
    expect(canceled?.finishedAt).toBeInstanceOf(Date);
  });

  it('returns null for an unknown id', async () => {
    expect(await admin.getJob(randomUUID())).toBeNull();
  });

  it.each(['not-a-uuid', '', '123e4567-e89b-12d3-a456-42661417400', "1' OR '1'='1"])(
    'rejects a non-UUID id (%p) with WorkhorseValidationError',
    async (bad) => {
      const error = await admin.getJob(bad).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkhorseValidationError);
      expect((error as WorkhorseValidationError).field).toBe('jobId');
    },
  );
});

describe('getJobTimeline', () => {
  /** A job with a long history: two failed attempts, a checkpoint and a success. */
  async function jobWithHistory(q: string): Promise<string> {
    const id = await queue.enqueue('timeline.job', null, { queue: q, maxAttempts: 5 });
    for (let attempt = 1; attempt <= 2; attempt++) {
      const job = await claimOne(db.pool, q, { workerId: WORKER });
      expect((await fail(db.pool, job, { name: 'Error', message: `attempt ${attempt}` }, { retryDelayMs: 0 })).status).toBe('retry_scheduled');
    }
    const job = await claimOne(db.pool, q, { workerId: WORKER });
    const saved = await db.pool.query<{ status: string }>(
      "SELECT workhorse.save_checkpoint_v1($1, $2, $3, 'stage-1', '\"ok\"'::jsonb) AS status",
      [id, WORKER, job.fence],
    );
    expect(saved.rows[0].status).toBe('saved');
    expect(await complete(db.pool, job, 'done')).toBe('succeeded');
    return id;
  }

  async function allPages(id: string, limit: number): Promise<{ pages: TimelineEntry[][]; lastCursor: string | null }> {
    const pages: TimelineEntry[][] = [];
    let cursor: string | undefined;
    for (let guard = 0; guard < 100; guard++) {
      const page = await admin.getJobTimeline(id, { limit, cursor });
      pages.push(page.items);
      if (page.nextCursor === null) return { pages, lastCursor: null };
      cursor = page.nextCursor;
    }
    throw new Error('the timeline never ended');
  }

  it('pages through events and attempts with a cursor: same entries, same order, no duplicates', async () => {
    const id = await jobWithHistory('timeline');
    const full = await admin.getJobTimeline(id, { limit: 1000 });
    expect(full.nextCursor).toBeNull();
    expect(full.items.length).toBeGreaterThanOrEqual(7);

    // Deterministic prefix: the first attempt's record precedes its retry event.
    expect(full.items.slice(0, 4).map((e) => [e.source, e.kind, e.attempt])).toEqual([
      ['event', 'enqueued', 0],
      ['event', 'claimed', 1],
      ['attempt', 'failed', 1],
      ['event', 'retry_scheduled', 1],
    ]);
    expect(full.items.filter((e) => e.source === 'attempt').map((e) => [e.kind, e.attempt])).toEqual([
      ['failed', 1],
      ['failed', 2],
      ['succeeded', 3],
    ]);
    expect(full.items.filter((e) => e.source === 'event').map((e) => e.kind)).toEqual([
      'enqueued',
      'claimed',
      'retry_scheduled',
      'claimed',
      'retry_scheduled',
      'claimed',
      'checkpoint_saved',
      'succeeded',
    ]);
    const ids = full.items.map((e) => BigInt(e.id));
    for (let i = 1; i < ids.length; i++) expect(ids[i]).toBeGreaterThan(ids[i - 1]);

    for (const limit of [2, 3]) {
      const { pages } = await allPages(id, limit);
      for (const page of pages.slice(0, -1)) expect(page).toHaveLength(limit);
      expect(pages.at(-1)?.length ?? 0).toBeLessThanOrEqual(limit);
      const concatenated = pages.flat();
      expect(concatenated).toEqual(full.items);
      expect(new Set(concatenated.map((e) => e.id)).size).toBe(concatenated.length);
    }
  });

  it('the last page has nextCursor null, also when the entries divide evenly into pages', async () => {
    const id = await queue.enqueue('timeline.job', null, { queue: 'timeline-even' });
    const job = await claimOne(db.pool, 'timeline-even', { workerId: WORKER });
    expect(await complete(db.pool, job, null)).toBe('succeeded');
    const whole = (await admin.getJobTimeline(id, { limit: 1000 })).items;
    expect(whole.map((e) => [e.source, e.kind])).toEqual([
      ['event', 'enqueued'],
      ['event', 'claimed'],
      ['attempt', 'succeeded'],
      ['event', 'succeeded'],
    ]);

    // Four entries: two full pages of 2, and the second says it is the last.
    const { pages } = await allPages(id, 2);
    expect(pages.map((page) => page.length)).toEqual([2, 2]);
    expect(pages.flat()).toEqual(whole);
    for (const limit of [4, 5]) {
      const { pages: single } = await allPages(id, limit);
      expect(single.map((page) => page.length)).toEqual([4]);
    }
    const { pages: odd } = await allPages(id, 3);
    expect(odd.map((page) => page.length)).toEqual([3, 1]);
  });

  it('a timeline that exactly fills a page of 1000 (the most one SQL call returns) ends there too', async () => {
    const id = await queue.enqueue('timeline.job', null, { queue: 'timeline-thousand' });
    const job = await claimOne(db.pool, 'timeline-thousand', { workerId: WORKER });
    const saveCheckpoints = (from: number, to: number) =>
      db.pool.query('SELECT workhorse.save_checkpoint_v1($1, $2, $3, $4 || g, \'1\'::jsonb) FROM generate_series($5::int, $6::int) g', [
        id,
        WORKER,
        job.fence,
        'step-',
        from,
        to,
      ]);
    // enqueued, claimed and 998 checkpoint_saved events: 1000 entries.
    await saveCheckpoints(1, 998);
    const full = await admin.getJobTimeline(id, { limit: 1000 });
    expect(full.items).toHaveLength(1000);
    expect(full.nextCursor).toBeNull();
    // One more, and the same page says another follows, which holds exactly that one.
    await saveCheckpoints(999, 999);
    const first = await admin.getJobTimeline(id, { limit: 1000 });
    expect(first.items.map((e) => e.id)).toEqual(full.items.map((e) => e.id));
    const rest = await admin.getJobTimeline(id, { limit: 1000, cursor: first.nextCursor as string });
    expect(rest.items.map((e) => [e.kind, e.data])).toEqual([['checkpoint_saved', { name: 'step-999' }]]);
    expect(rest.nextCursor).toBeNull();
  });

  it('the enqueued entry says whether the job was ready or scheduled, and from when', async () => {
    const later = new Date(Date.now() + 3_600_000);
    const [ready, scheduled] = await queue.enqueueMany([
      { type: 'timeline.job', payload: null, queue: 'timeline-enqueued' },
      { type: 'timeline.job', payload: null, queue: 'timeline-enqueued', runAt: later },
    ]);
    const first = async (id: string) => (await admin.getJobTimeline(id, { limit: 1 })).items[0];

    const readyEntry = await first(ready);
    expect(readyEntry.kind).toBe('enqueued');
    expect(readyEntry.data).toEqual({ state: 'ready', runAt: expect.any(String) });
    expect(new Date(readyEntry.data?.runAt as string).getTime()).toBe(readyEntry.at.getTime());
    expect(new Date(readyEntry.data?.runAt as string).getTime()).toBe((await admin.getJob(ready))?.runAt.getTime());

    const scheduledEntry = await first(scheduled);
    expect(scheduledEntry.data).toEqual({ state: 'scheduled', runAt: expect.any(String) });
    expect(new Date(scheduledEntry.data?.runAt as string).getTime()).toBe(later.getTime());
  });

  it('refuses a tampered or foreign cursor with InvalidCursorError', async () => {
    const id = await jobWithHistory('timeline-cursor');
    const first = await admin.getJobTimeline(id, { limit: 2 });
    expect(first.nextCursor).not.toBeNull();
    const cursor = first.nextCursor as string;
    const decoded = Buffer.from(cursor, 'base64url').toString('utf8');

    // A second job in that queue, so that a listing of one job per page has a next page.
    await queue.enqueue('timeline-cursor.other', {}, { queue: 'timeline-cursor' });
    const listCursor = (await admin.listJobs({ queue: 'timeline-cursor', limit: 1 })).nextCursor;
    expect(listCursor).not.toBeNull();
    const tampered = [
      'not a cursor',
      Buffer.from(`${decoded}; DROP TABLE workhorse.job`, 'utf8').toString('base64url'),
      Buffer.from(decoded.replace(/\d+$/, '-5'), 'utf8').toString('base64url'),
      Buffer.from(decoded.replace(/^[^:]*/, 'jobs'), 'utf8').toString('base64url'),
      Buffer.from('timeline:99999999999999999999', 'utf8').toString('base64url'),
      listCursor as string,
    ];
    for (const bad of tampered) {
      const error = await admin.getJobTimeline(id, { limit: 2, cursor: bad }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidCursorError);
      expect((error as InvalidCursorError).field).toBe('cursor');
    }
    // The genuine cursor still works.
    expect((await admin.getJobTimeline(id, { limit: 2, cursor })).items).toHaveLength(2);
  });

  it('an unknown job has an empty timeline', async () => {
    expect(await admin.getJobTimeline(randomUUID())).toEqual({ items: [], nextCursor: null });
  });
});

describe('listJobs', () => {
  interface Made {
    id: string;
    queue: string;
    type: string;
    state: JobState;
  }

  /**
   * Jobs across two queues and two types in every reachable state, enqueued one by one so their
   * creation order is known.
   */
  async function makeMix(prefix: string): Promise<Made[]> {
    const made: Made[] = [];
    const qa = `${prefix}-a`;
    const qb = `${prefix}-b`;
    const ta = `${prefix}.alpha`;
    const tb = `${prefix}.beta`;
    const plan: [string, string, JobState][] = [
      [qa, ta, 'succeeded'],
      [qa, tb, 'ready'],
      [qb, ta, 'failed'],
      [qa, ta, 'scheduled'],
      [qb, tb, 'canceled'],
      [qa, ta, 'active'],
      [qb, ta, 'ready'],
      [qa, tb, 'succeeded'],
      [qb, tb, 'scheduled'],
      [qa, ta, 'ready'],
    ];
    for (const [q, type, state] of plan) {
      const runAt = state === 'scheduled' ? new Date(Date.now() + 3_600_000) : undefined;
      const id = await queue.enqueue(type, null, { queue: q, runAt, maxAttempts: 1 });
      made.push({ id, queue: q, type, state });
    }
    // Drive each job to its planned state through the protocol.
    for (const job of made) {
      if (job.state === 'canceled') expect(await admin.cancel(job.id)).toBe('canceled');
      if (job.state === 'succeeded' || job.state === 'failed' || job.state === 'active') {
        const claimed = await claim(db.pool, job.queue, { workerId: WORKER, limit: 100 });
        // Claiming a queue takes every ready job in it; hand back those that should stay ready.
        for (const other of claimed) {
          if (other.jobId === job.id) continue;
          const status = await db.pool.query<{ status: string }>('SELECT workhorse.release_v1($1, $2, $3, 0) AS status', [
            other.jobId,
            WORKER,
            other.fence,
          ]);
          expect(status.rows[0].status).toBe('released');
        }
        const mine = claimed.find((c) => c.jobId === job.id) as ClaimedJob;
        if (job.state === 'succeeded') expect(await complete(db.pool, mine, { ok: true })).toBe('succeeded');
        if (job.state === 'failed') expect((await fail(db.pool, mine, { name: 'Error', message: 'x' }, {})).status).toBe('failed');
      }
    }
    for (const job of made) expect((await admin.getJob(job.id))?.state).toBe(job.state);
    return made;
  }

  const newestFirst = (jobs: Made[]) => [...jobs].reverse().map((j) => j.id);

  async function list(filter: Parameters<Admin['listJobs']>[0]): Promise<JobSnapshot[]> {
    const page = await admin.listJobs({ limit: 1000, ...filter });
    expect(page.nextCursor).toBeNull();
    return page.items;
  }

  it('filters by queue, type and states, alone and combined, newest first', async () => {
    const made = await makeMix('lf');
    const [qa, qb, ta, tb] = ['lf-a', 'lf-b', 'lf.alpha', 'lf.beta'];
    const where = (f: (j: Made) => boolean) => newestFirst(made.filter(f));

    expect((await list({ queue: qa })).map((j) => j.id)).toEqual(where((j) => j.queue === qa));
    expect((await list({ queue: qb })).map((j) => j.id)).toEqual(where((j) => j.queue === qb));
    expect((await list({ type: ta })).map((j) => j.id)).toEqual(where((j) => j.type === ta));
    expect((await list({ queue: qa, type: tb })).map((j) => j.id)).toEqual(where((j) => j.queue === qa && j.type === tb));
    expect((await list({ queue: qa, states: ['ready'] })).map((j) => j.id)).toEqual(where((j) => j.queue === qa && j.state === 'ready'));
    expect((await list({ type: ta, states: ['failed', 'succeeded', 'canceled'] })).map((j) => j.id)).toEqual(
      where((j) => j.type === ta && ['failed', 'succeeded', 'canceled'].includes(j.state)),
    );
    expect((await list({ queue: qb, type: tb, states: ['scheduled', 'canceled'] })).map((j) => j.id)).toEqual(
      where((j) => j.queue === qb && j.type === tb && ['scheduled', 'canceled'].includes(j.state)),
    );
    expect((await list({ queue: qa, states: ['active'] })).map((j) => [j.id, j.state, j.workerId])).toEqual(
      made.filter((j) => j.state === 'active').map((j) => [j.id, 'active', WORKER]),
    );
    expect(await list({ queue: qa, type: ta, states: ['canceled'] })).toEqual([]);
    expect(await list({ queue: 'lf-nobody' })).toEqual([]);

    // A states filter alone spans every queue: each item has a listed state, and ours are all there.
    const terminal = await list({ states: ['succeeded', 'failed'] });
    expect(terminal.every((j) => j.state === 'succeeded' || j.state === 'failed')).toBe(true);
    const terminalIds = terminal.map((j) => j.id);
    const ours = made.filter((j) => j.state === 'succeeded' || j.state === 'failed').map((j) => j.id);
    expect(terminalIds.filter((id) => ours.includes(id))).toEqual([...ours].reverse());

    // Items carry the same snapshot getJob reports (which adds the job's lineage).
    for (const item of await list({ queue: qb })) {
      expect({ ...item, dependencies: [], waitingOn: [], parentId: null, children: [] }).toEqual(await admin.getJob(item.id));
    }
  });

  it('pages stably, newest first: jobs enqueued between reads neither shift nor join later pages', async () => {
    const q = 'list-paging';
    const original: string[] = [];
    for (let i = 0; i < 11; i++) original.push(await queue.enqueue('page.job', { i }, { queue: q }));

    const seen: string[] = [];
    const added: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await admin.listJobs({ queue: q, limit: 3, cursor });
      seen.push(...page.items.map((j) => j.id));
      cursor = page.nextCursor ?? undefined;
      pages++;
      // Newer jobs arrive, and an older one changes state, while the operator reads.
      added.push(await queue.enqueue('page.job', { added: pages }, { queue: q }));
      added.push(await queue.enqueue('page.job', { added: pages, second: true }, { queue: q }));
      if (pages === 1) expect(await admin.cancel(original[2])).toBe('canceled');
    } while (cursor !== undefined && pages < 20);

    expect(pages).toBe(4);
    expect(seen).toEqual([...original].reverse());
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.filter((id) => added.includes(id))).toEqual([]);

    // A fresh read from the top sees the newcomers first.
    const top = await admin.listJobs({ queue: q, limit: 2 });
    expect(top.items.map((j) => j.id)).toEqual([added[added.length - 1], added[added.length - 2]]);
  });

  it('a listing that exactly fills its last page ends there: no cursor to an empty page (limits 1, 3 and 1000)', async () => {
    const exact = async (q: string, jobs: number, limit: number) => {
      const ids: string[] = [];
      for (let from = 0; from < jobs; from += 1000) {
        const batch = Array.from({ length: Math.min(1000, jobs - from) }, (_, i) => ({ type: 'page.job', payload: { i: from + i }, queue: q }));
        ids.push(...(await queue.enqueueMany(batch)));
      }
      const pages: string[][] = [];
      let cursor: string | undefined;
      do {
        const page = await admin.listJobs({ queue: q, limit, cursor });
        // Every page handed out holds jobs: a cursor never leads to an empty page.
        expect(page.items.length).toBeGreaterThan(0);
        pages.push(page.items.map((j) => j.id));
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined && pages.length < 10);
      expect(pages.flat()).toEqual([...ids].reverse());
      return pages.map((p) => p.length);
    };
    expect(await exact('list-exact-1', 1, 1)).toEqual([1]);
    expect(await exact('list-exact-6', 6, 3)).toEqual([3, 3]);
    expect(await exact('list-exact-7', 7, 3)).toEqual([3, 3, 1]);
    expect(await exact('list-exact-1000', 1000, 1000)).toEqual([1000]);
    expect(await exact('list-exact-1001', 1001, 1000)).toEqual([1000, 1]);
    // The page size stays 1 to 1000 for callers (the SQL is asked for one row more).
    await expect(admin.listJobs({ limit: 1001 })).rejects.toMatchObject({ field: 'limit' });
  });

  it('pages stably under a states filter too', async () => {
    const q = 'list-paging-states';
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await queue.enqueue('page.job', { i }, { queue: q }));
    // Every other job ends canceled; the filter keeps the ready ones.
    for (let i = 1; i < ids.length; i += 2) await admin.cancel(ids[i]);
    const readyIds = ids.filter((_, i) => i % 2 === 0);

    const seen: string[] = [];
    let cursor: string | undefined;
    let guard = 0;
    do {
      const page = await admin.listJobs({ queue: q, states: ['ready'], limit: 2, cursor });
      seen.push(...page.items.map((j) => j.id));
      cursor = page.nextCursor ?? undefined;
      await queue.enqueue('page.job', { late: guard }, { queue: q });
    } while (cursor !== undefined && ++guard < 20);
    expect(seen).toEqual([...readyIds].reverse());
  });

  it('refuses bad filters and cursors with typed errors', async () => {
    await expect(admin.listJobs({ states: ['done' as JobState] })).rejects.toMatchObject({ field: 'states' });
    await expect(admin.listJobs({ limit: 0 })).rejects.toMatchObject({ field: 'limit' });
    await expect(admin.listJobs({ queue: '' })).rejects.toBeInstanceOf(WorkhorseValidationError);
    const unknownKey = { queues: ['x'] } as unknown as Parameters<Admin['listJobs']>[0];
    await expect(admin.listJobs(unknownKey)).rejects.toMatchObject({ field: 'queues' });
    await expect(admin.listJobs({ cursor: 'garbage' })).rejects.toBeInstanceOf(InvalidCursorError);
    const timelineCursor = Buffer.from('timeline:5', 'utf8').toString('base64url');
    await expect(admin.listJobs({ cursor: timelineCursor })).rejects.toBeInstanceOf(InvalidCursorError);
  });
});
