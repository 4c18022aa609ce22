import { WorkhorseValidationError, type DedupeOptions } from '../../lib/core';
import { freshQueue } from '../support/db';
import { expectRejects } from '../support/expect-rejects';
import { FixtureProcesses, waitForLine } from '../support/fixture-process';
import { useTestDatabase } from '../support/test-database';

const ENQUEUER = require.resolve('../fixtures/dedupe-enqueuer.ts');

describe('deduplication windows (enqueue dedupe: throttle and debounce)', () => {
  const children = new FixtureProcesses();
  const { db, queue } = useTestDatabase({ beforeDrop: () => children.killAll() });

  /** The jobs of a queue with what a user sees of them. */
  async function jobsOf(queueName: string): Promise<{ id: string; payload: unknown; state: string; run_at: Date; attempt: number }[]> {
    const { rows } = await db.pool.query(
      `SELECT j.id, j.payload, r.state, r.run_at, r.current_attempt AS attempt
       FROM workhorse.job j JOIN workhorse.job_runtime r ON r.job_id = j.id
       WHERE j.queue = $1 ORDER BY j.seq`,
      [queueName],
    );
    return rows;
  }

  async function dbNow(): Promise<number> {
    const { rows } = await db.pool.query<{ now: Date }>('SELECT clock_timestamp() AS now');
    return rows[0].now.getTime();
  }

  async function claim(queueName: string): Promise<string[]> {
    const { rows } = await db.pool.query<{ job_id: string }>('SELECT job_id FROM workhorse.claim_many_v1($1, $2, $3, $4)', [
      [queueName],
      'dedupe-test-worker',
      10,
      30000,
    ]);
    return rows.map((row) => row.job_id);
  }

  const throttle = (key: string, windowMs = 60000): DedupeOptions => ({ key, windowMs, mode: 'throttle' });
  const debounce = (key: string, windowMs = 60000, replace?: DedupeOptions['replace']): DedupeOptions =>
    replace === undefined ? { key, windowMs, mode: 'debounce' } : { key, windowMs, mode: 'debounce', replace };

  describe('throttle', () => {
    it('keeps the first job of the window: later enqueues answer it, write nothing, and say so', async () => {
      const q = freshQueue();
      const first = await queue.enqueueDeduped('report.send', { n: 1 }, { queue: q, dedupe: throttle('user-1') });
      const second = await queue.enqueueDeduped('report.send', { n: 2 }, { queue: q, dedupe: throttle('user-1') });
      expect(first.outcome).toBe('created');
      expect(second).toEqual({ jobId: first.jobId, outcome: 'throttled' });
      const jobs = await jobsOf(q);
      expect(jobs).toHaveLength(1);
      expect(jobs[0]).toMatchObject({ id: first.jobId, payload: { n: 1 }, state: 'ready' });
      // `enqueue` takes the option too and answers the id.
      await expect(queue.enqueue('report.send', { n: 3 }, { queue: q, dedupe: throttle('user-1') })).resolves.toBe(first.jobId);
    });

    it('opens a new window once the last one has passed, whatever the job did meanwhile', async () => {
      const q = freshQueue();
      const first = await queue.enqueueDeduped('report.send', { n: 1 }, { queue: q, dedupe: throttle('user-2', 200) });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const second = await queue.enqueueDeduped('report.send', { n: 2 }, { queue: q, dedupe: throttle('user-2', 200) });
      expect(second.outcome).toBe('created');
      expect(second.jobId).not.toBe(first.jobId);
      expect((await jobsOf(q)).map((job) => job.payload)).toEqual([{ n: 1 }, { n: 2 }]);
    });

    it('keeps keys apart per queue, type and mode', async () => {
      const q = freshQueue();
      const a = await queue.enqueueDeduped('a.type', null, { queue: q, dedupe: throttle('k') });
      const b = await queue.enqueueDeduped('b.type', null, { queue: q, dedupe: throttle('k') });
      const c = await queue.enqueueDeduped('a.type', null, { queue: freshQueue(), dedupe: throttle('k') });
      const d = await queue.enqueueDeduped('a.type', null, { queue: q, dedupe: debounce('k') });
      expect([a, b, c, d].map((r) => r.outcome)).toEqual(['created', 'created', 'created', 'created']);
      expect(new Set([a, b, c, d].map((r) => r.jobId)).size).toBe(4);
    });
  });

  describe('debounce', () => {
    it('the last call wins: one job, the last payload, run time pushed to the last call + window', async () => {
      const q = freshQueue();
      const before = await dbNow();
      const first = await queue.enqueueDeduped('search.reindex', { v: 1 }, { queue: q, dedupe: debounce('doc-1', 5000) });
      expect(first.outcome).toBe('created');
      let [job] = await jobsOf(q);
      expect(job.state).toBe('scheduled');
      expect(job.run_at.getTime()).toBeGreaterThanOrEqual(before + 5000);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const second = await queue.enqueueDeduped('search.reindex', { v: 2 }, { queue: q, dedupe: debounce('doc-1', 5000) });
      const after = await dbNow();
      expect(second).toEqual({ jobId: first.jobId, outcome: 'debounced' });
      const jobs = await jobsOf(q);
      expect(jobs).toHaveLength(1);
      [job] = jobs;
      expect(job.payload).toEqual({ v: 2 });
      expect(job.run_at.getTime()).toBeGreaterThan(before + 5040);
      expect(job.run_at.getTime()).toBeLessThanOrEqual(after + 5000);
      // The job's history says what the debounce changed.
      const { rows } = await db.pool.query(`SELECT data FROM workhorse.job_event WHERE job_id = $1 AND kind = 'debounced'`, [first.jobId]);
      expect(rows).toHaveLength(1);
      expect(rows[0].data.payloadReplaced).toBe(true);
      expect(new Date(rows[0].data.runAt as string).getTime()).toBe(job.run_at.getTime());
    });

    it("replace: 'payload' keeps the run time, 'runAt' keeps the payload", async () => {
      const q = freshQueue();
      const p = await queue.enqueueDeduped('t', { v: 1 }, { queue: q, dedupe: debounce('p', 5000, 'payload') });
      const [before] = await jobsOf(q);
      await new Promise((resolve) => setTimeout(resolve, 20));
      await expect(queue.enqueueDeduped('t', { v: 2 }, { queue: q, dedupe: debounce('p', 5000, 'payload') })).resolves.toEqual({
        jobId: p.jobId,
        outcome: 'debounced',
      });
      const [after] = await jobsOf(q);
      expect(after.payload).toEqual({ v: 2 });
      expect(after.run_at).toEqual(before.run_at);

      const r = await queue.enqueueDeduped('u', { v: 1 }, { queue: q, dedupe: debounce('r', 5000, 'runAt') });
      const rBefore = (await jobsOf(q)).find((job) => job.id === r.jobId)!;
      await new Promise((resolve) => setTimeout(resolve, 20));
      await queue.enqueueDeduped('u', { v: 2 }, { queue: q, dedupe: debounce('r', 5000, 'runAt') });
      const rAfter = (await jobsOf(q)).find((job) => job.id === r.jobId)!;
      expect(rAfter.payload).toEqual({ v: 1 });
      expect(rAfter.run_at.getTime()).toBeGreaterThan(rBefore.run_at.getTime());
    });

    it('a job that has started is left alone: the next enqueue makes a new job', async () => {
      const q = freshQueue();
      const first = await queue.enqueueDeduped('t', { v: 1 }, { queue: q, dedupe: debounce('s', 100) });
      await new Promise((resolve) => setTimeout(resolve, 150));
      await db.pool.query('SELECT workhorse.tick_v1()');
      expect(await claim(q)).toEqual([first.jobId]);
      const second = await queue.enqueueDeduped('t', { v: 2 }, { queue: q, dedupe: debounce('s', 100) });
      expect(second.outcome).toBe('created');
      expect(second.jobId).not.toBe(first.jobId);
      const jobs = await jobsOf(q);
      expect(jobs.map((job) => [job.payload, job.state])).toEqual([
        [{ v: 1 }, 'active'],
        [{ v: 2 }, 'scheduled'],
      ]);
    });

    it('a due job no worker has taken yet is still debounced (it waits for the new window)', async () => {
      const q = freshQueue();
      const first = await queue.enqueueDeduped('t', { v: 1 }, { queue: q, dedupe: debounce('due', 100) });
      await new Promise((resolve) => setTimeout(resolve, 150));
      await db.pool.query('SELECT workhorse.tick_v1()');
      expect((await jobsOf(q))[0].state).toBe('ready');
      await expect(queue.enqueueDeduped('t', { v: 2 }, { queue: q, dedupe: debounce('due', 100) })).resolves.toEqual({
        jobId: first.jobId,
        outcome: 'debounced',
      });
      expect((await jobsOf(q)).map((job) => [job.payload, job.state])).toEqual([[{ v: 2 }, 'scheduled']]);
      expect(await claim(q)).toEqual([]);
    });
  });

  describe('in the caller transaction', () => {
    it('rolls back with it: the key is free again', async () => {
      const q = freshQueue();
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        await queue.enqueueDeduped('t', { v: 1 }, { queue: q, dedupe: throttle('tx') }, client);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      expect(await jobsOf(q)).toEqual([]);
      await expect(queue.enqueueDeduped('t', { v: 2 }, { queue: q, dedupe: throttle('tx') })).resolves.toMatchObject({ outcome: 'created' });
    });

    it('a second transaction on the key waits for the first and then answers its job', async () => {
      const q = freshQueue();
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        const first = await queue.enqueueDeduped('t', { v: 1 }, { queue: q, dedupe: debounce('wait') }, client);
        let settled = false;
        const second = queue.enqueueDeduped('t', { v: 2 }, { queue: q, dedupe: debounce('wait') }).finally(() => {
          settled = true;
        });
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(settled).toBe(false);
        await client.query('COMMIT');
        await expect(second).resolves.toEqual({ jobId: first.jobId, outcome: 'debounced' });
      } finally {
        client.release();
      }
      expect((await jobsOf(q)).map((job) => job.payload)).toEqual([{ v: 2 }]);
    });
  });

  describe('a batch with two requests of one key acts as two enqueues in its order', () => {
    it('throttle: both answer the first job, one job written', async () => {
      const q = freshQueue();
      const ids = await queue.enqueueMany([
        { type: 't', payload: { v: 1 }, queue: q, dedupe: throttle('batch') },
        { type: 't', payload: { v: 2 }, queue: q, dedupe: throttle('batch') },
        { type: 't', payload: { v: 3 }, queue: q },
      ]);
      expect(ids[1]).toBe(ids[0]);
      expect((await jobsOf(q)).map((job) => job.payload)).toEqual([{ v: 1 }, { v: 3 }]);
    });

    it('debounce: one job with the last payload', async () => {
      const q = freshQueue();
      const ids = await queue.enqueueMany([
        { type: 't', payload: { v: 1 }, queue: q, dedupe: debounce('batch') },
        { type: 't', payload: { v: 2 }, queue: q, dedupe: debounce('batch') },
      ]);
      expect(ids[1]).toBe(ids[0]);
      expect((await jobsOf(q)).map((job) => [job.id, job.payload])).toEqual([[ids[0], { v: 2 }]]);
      const { rows } = await db.pool.query(
        `SELECT job_id::text, outcome FROM workhorse.enqueue_many_v2($1::jsonb)`,
        [JSON.stringify([
          { type: 't', payload: { v: 3 }, queue: q, dedupe: debounce('batch') },
          { type: 't', payload: { v: 4 }, queue: q },
        ])],
      );
      expect(rows[0]).toEqual({ job_id: ids[0], outcome: 'debounced' });
      expect(rows[1].outcome).toBe('created');
    });
  });

  describe('bad options are refused, naming the field, before anything is written', () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ['an empty key', { dedupe: { key: '', windowMs: 1000, mode: 'throttle' } }, 'dedupe.key'],
      ['a key over 512 characters', { dedupe: { key: 'k'.repeat(513), windowMs: 1000, mode: 'throttle' } }, 'dedupe.key'],
      ['a window under 100 ms', { dedupe: { key: 'k', windowMs: 99, mode: 'throttle' } }, 'dedupe.windowMs'],
      ['a window over 30 days', { dedupe: { key: 'k', windowMs: 2592000001, mode: 'throttle' } }, 'dedupe.windowMs'],
      ['an unknown mode', { dedupe: { key: 'k', windowMs: 1000, mode: 'queue' } }, 'dedupe.mode'],
      ['replace with a throttle', { dedupe: { key: 'k', windowMs: 1000, mode: 'throttle', replace: 'payload' } }, 'dedupe.replace'],
      ['an unknown replace', { dedupe: { key: 'k', windowMs: 1000, mode: 'debounce', replace: 'all' } }, 'dedupe.replace'],
      ['an unknown field', { dedupe: { key: 'k', windowMs: 1000, mode: 'debounce', ttl: 1 } }, 'dedupe.ttl'],
      ['with an idempotency key', { dedupe: { key: 'k', windowMs: 1000, mode: 'throttle' }, idempotencyKey: 'i' }, 'dedupe'],
      ['a debounce with runAt', { dedupe: { key: 'k', windowMs: 1000, mode: 'debounce' }, runAt: new Date(Date.now() + 60000) }, 'runAt'],
    ];
    it.each(cases)('%s', async (_name, options, field) => {
      const q = freshQueue();
      const error = await expectRejects(queue.enqueueDeduped('t', null, { queue: q, ...options } as never), WorkhorseValidationError);
      expect(error.field).toBe(field);
      expect(await jobsOf(q)).toEqual([]);
      const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM workhorse.enqueue_dedupe WHERE queue = $1', [q]);
      expect(rows[0].n).toBe(0);
    });
  });

  it('a child job takes no dedupe option (run_children_v1 refuses it, naming the field)', async () => {
    const q = freshQueue();
    const parent = await queue.enqueue('parent.job', null, { queue: q });
    const { rows } = await db.pool.query<{ job_id: string; fence_token: string }>(
      'SELECT job_id, fence_token FROM workhorse.claim_many_v1($1, $2, 1, 30000)',
      [[q], 'dedupe-test-worker'],
    );
    expect(rows.map((row) => row.job_id)).toEqual([parent]);
    const children = [{ type: 'child.job', payload: null, dedupe: throttle('child') }];
    await expect(
      db.pool.query('SELECT * FROM workhorse.run_children_v1($1, $2, $3, $4, $5::jsonb)', [parent, 'dedupe-test-worker', rows[0].fence_token, 'k', JSON.stringify(children)]),
    ).rejects.toMatchObject({ code: 'P1001', column: 'children[0].dedupe' });
    const { rows: keys } = await db.pool.query('SELECT count(*)::int AS n FROM workhorse.enqueue_dedupe WHERE type = $1', ['child.job']);
    expect(keys[0].n).toBe(0);
  });

  it('an enqueue without dedupe never reads or writes the dedupe keys', async () => {
    const q = freshQueue();
    const client = await db.pool.connect();
    // This backend's counters of the table (sequential and key scans, rows inserted).
    const touched = async () =>
      (
        await client.query<{ n: string }>(
          `SELECT pg_stat_get_xact_numscans('workhorse.enqueue_dedupe'::regclass)
                  + pg_stat_get_xact_numscans('workhorse.enqueue_dedupe_pkey'::regclass)
                  + pg_stat_get_xact_tuples_inserted('workhorse.enqueue_dedupe'::regclass) AS n`,
        )
      ).rows[0].n;
    try {
      await client.query('BEGIN');
      // (A backend's counters not yet reported may include its earlier transactions: a delta.)
      const before = await touched();
      await queue.enqueue('plain.job', { n: 1 }, { queue: q }, client);
      await queue.enqueueMany(Array.from({ length: 50 }, (_, n) => ({ type: 'plain.job', payload: { n }, queue: q })), client);
      expect(await touched()).toBe(before);
      // (And the counters do count a job that uses it.)
      await queue.enqueue('plain.job', null, { queue: q, dedupe: throttle('counted') }, client);
      expect(Number(await touched())).toBeGreaterThan(Number(before));
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });

  it('tick_v1 deletes keys that hold nothing any more (a passed throttle window, a started debounce)', async () => {
    const q = freshQueue();
    await queue.enqueueDeduped('t', null, { queue: q, dedupe: throttle('gone', 100) });
    const live = await queue.enqueueDeduped('t', null, { queue: q, dedupe: throttle('live', 60000) });
    await queue.enqueueDeduped('d', null, { queue: q, dedupe: debounce('started', 100) });
    await queue.enqueueDeduped('d', null, { queue: q, dedupe: debounce('waiting', 60000) });
    await new Promise((resolve) => setTimeout(resolve, 150));
    await db.pool.query('SELECT workhorse.tick_v1()');
    await claim(q);
    await db.pool.query('SELECT workhorse.tick_v1()');
    const { rows } = await db.pool.query(
      'SELECT type, mode, job_id::text FROM workhorse.enqueue_dedupe WHERE queue = $1 ORDER BY type, mode',
      [q],
    );
    expect(rows.map((row) => [row.type, row.mode])).toEqual([
      ['d', 'debounce'],
      ['t', 'throttle'],
    ]);
    expect(rows[1].job_id).toBe(live.jobId);
  });

  describe('across processes', () => {
    it.each(['throttle', 'debounce'] as const)('%s: several processes enqueueing one key at once make exactly one job', async (mode) => {
      const q = freshQueue();
      const dedupe: DedupeOptions = { key: 'shared', windowMs: 60000, mode };
      const procs = Array.from({ length: 4 }, (_, i) =>
        children.start(ENQUEUER, {
          DEDUPE_URL: db.url,
          DEDUPE_TYPE: 'race.job',
          DEDUPE_QUEUE: q,
          DEDUPE_OPTION: JSON.stringify(dedupe),
          DEDUPE_NAME: `p${i}`,
          DEDUPE_COUNT: '25',
        }),
      );
      for (const proc of procs) await waitForLine(proc, 'READY', 30000);
      for (const proc of procs) proc.process.stdin.write('GO\n');
      const results = (await Promise.all(procs.map((proc) => waitForLine(proc, 'RESULT ', 60000)))).flatMap(
        (line) => JSON.parse(line.slice('RESULT '.length)) as { jobId: string; outcome: string; payload: unknown }[],
      );
      expect(results).toHaveLength(100);
      const jobs = await jobsOf(q);
      expect(jobs).toHaveLength(1);
      expect(new Set(results.map((r) => r.jobId))).toEqual(new Set([jobs[0].id]));
      expect(results.filter((r) => r.outcome === 'created')).toHaveLength(1);
      expect(results.filter((r) => r.outcome === (mode === 'throttle' ? 'throttled' : 'debounced'))).toHaveLength(99);
      if (mode === 'throttle') {
        expect(jobs[0].payload).toEqual(results.find((r) => r.outcome === 'created')!.payload);
      } else {
        // The last call wins: each process enqueues in order, so the payload left is the last
        // call of one of the processes.
        expect(procs.map((_, i) => ({ from: `p${i}`, n: 24 }))).toContainEqual(jobs[0].payload);
        const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM workhorse.job_event WHERE job_id = $1 AND kind = 'debounced'`, [
          jobs[0].id,
        ]);
        expect(rows[0].n).toBe(99);
        const last = await queue.enqueueDeduped('race.job', { from: 'test' }, { queue: q, dedupe });
        expect(last).toEqual({ jobId: jobs[0].id, outcome: 'debounced' });
        expect((await jobsOf(q))[0].payload).toEqual({ from: 'test' });
      }
      // (Four node processes start and transpile: give a loaded machine time.)
    }, 180_000);
  });
});
