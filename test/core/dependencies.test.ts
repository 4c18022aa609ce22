/**
 * Dependencies (fan-in): `dependsOn` with its policies, resolution in the transaction that ends
 * the last prerequisite, two prerequisites ending at once, a 10,000-job graph, one job waiting on
 * 1,000 prerequisites, `ctx.dependencies()`, `admin.getJob` lineage and hostile input.
 */
import {
  UnknownDependencyError,
  Worker,
  WorkhorseValidationError,
  type DependencyOutcome,
  type EnqueueRequest,
} from '../../lib/core';
import { claim, claimOne, complete, fail } from '../support/protocol';
import { stateOf } from '../support/job-state';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { pool, queue, admin } = useTestDatabase();

async function counts(): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ jobs: string; edges: string; events: string }>(
    'SELECT (SELECT count(*) FROM workhorse.job) AS jobs, (SELECT count(*) FROM workhorse.job_dependency) AS edges, ' +
      '(SELECT count(*) FROM workhorse.job_event) AS events',
  );
  return { jobs: Number(rows[0].jobs), edges: Number(rows[0].edges), events: Number(rows[0].events) };
}

/** Claims and completes (or fails) one job of `q` by hand. */
async function finishOne(q: string, how: 'complete' | 'fail' = 'complete'): Promise<string> {
  const job = await claimOne(pool, q);
  if (how === 'complete') await complete(pool, job, { from: job.jobId });
  else await fail(pool, job, { name: 'Boom', message: 'no' }, { nonRetryable: true });
  return job.jobId;
}

describe('dependsOn', () => {
  test('a job waits blocked until every prerequisite ended, then becomes ready; admin.getJob shows what it waits on', async () => {
    const [a, b] = await queue.enqueueMany([
      { type: 'dep.a', payload: 1, queue: 'd1' },
      { type: 'dep.b', payload: 2, queue: 'd1' },
    ]);
    const c = await queue.enqueue('dep.c', {}, { queue: 'd1c', dependsOn: [a, b] });
    expect(await stateOf(pool, c)).toBe('blocked');
    const blocked = await admin.getJob(c);
    expect(blocked?.waitingOn.map((l) => l.id).sort()).toEqual([a, b].sort());
    expect(blocked?.dependencies.map((l) => l.id)).toEqual([a, b]);
    // Nothing to claim while blocked.
    expect(await claim(pool, 'd1c')).toEqual([]);

    await finishOne('d1');
    expect(await stateOf(pool, c)).toBe('blocked');
    expect((await admin.getJob(c))?.waitingOn).toHaveLength(1);
    await finishOne('d1');
    expect(await stateOf(pool, c)).toBe('ready');
    expect((await admin.getJob(c))?.waitingOn).toEqual([]);
    const timeline = await admin.getJobTimeline(c);
    expect(timeline.items.map((e) => e.kind)).toEqual(['enqueued', 'unblocked']);
    expect(timeline.items[0].data).toMatchObject({ state: 'blocked' });
    expect(timeline.items[1].data).toMatchObject({ state: 'ready' });
    const job = await claimOne(pool, 'd1c');
    expect(job.jobId).toBe(c);
    await complete(pool, job);
  });

  test('a runAt still ahead when the last prerequisite ends makes the dependent scheduled', async () => {
    const a = await queue.enqueue('dep.a', null, { queue: 'd2' });
    const later = new Date(Date.now() + 3_600_000);
    const c = await queue.enqueue('dep.c', null, { queue: 'd2c', dependsOn: [a], runAt: later });
    await finishOne('d2');
    expect(await stateOf(pool, c)).toBe('scheduled');
    expect((await admin.getJob(c))?.runAt.getTime()).toBe(later.getTime());
    await admin.cancel(c);
  });

  test('prerequisites that already ended count at once: the dependent is ready (or settles) in the enqueue itself', async () => {
    const a = await queue.enqueue('dep.a', null, { queue: 'd3' });
    await finishOne('d3');
    const c = await queue.enqueue('dep.c', null, { queue: 'd3c', dependsOn: [a] });
    expect(await stateOf(pool, c)).toBe('ready');
    const f = await queue.enqueue('dep.f', null, { queue: 'd3' });
    await finishOne('d3', 'fail');
    const d = await queue.enqueue('dep.d', null, { queue: 'd3c', dependsOn: [a, f] });
    expect(await stateOf(pool, d)).toBe('failed');
    await admin.cancel(c);
  });

  test.each([
    ['failed', {}, 'failed', 'DependencyFailed'],
    ['failed', { onDependencyFailed: 'cancel' }, 'canceled', 'DependencyFailed'],
    ['failed', { onDependencyFailed: 'run' }, 'ready', null],
    ['canceled', {}, 'canceled', 'DependencyCanceled'],
    ['canceled', { onDependencyCanceled: 'fail' }, 'failed', 'DependencyCanceled'],
    ['canceled', { onDependencyCanceled: 'run' }, 'ready', null],
  ] as const)('a prerequisite that ended %s under %j leaves the dependent %s', async (ended, policy, expected, errorName) => {
    const q = `pol-${ended}-${expected}`;
    const [ok, bad] = await queue.enqueueMany([
      { type: 'dep.ok', payload: null, queue: q },
      { type: 'dep.bad', payload: null, queue: `${q}-bad` },
    ]);
    const c = await queue.enqueue('dep.c', null, { queue: `${q}-c`, dependsOn: [ok, bad], ...policy });
    await finishOne(q);
    if (ended === 'failed') await finishOne(`${q}-bad`, 'fail');
    else expect(await admin.cancel(bad)).toBe('canceled');
    const job = await admin.getJob(c);
    expect(job?.state).toBe(expected);
    if (errorName) {
      expect(job?.error).toMatchObject({ name: errorName, prerequisiteId: bad, prerequisiteState: ended });
      const timeline = await admin.getJobTimeline(c);
      expect(timeline.items.at(-1)).toMatchObject({ kind: expected, data: { error: { name: errorName } } });
    } else {
      await admin.cancel(c);
    }
  });

  test('a failure settles a whole chain under policy fail in the same transaction, however long', async () => {
    const root = await queue.enqueue('dep.root', null, { queue: 'chain' });
    const requests: EnqueueRequest[] = [{ type: 'dep.link', payload: 0, queue: 'chain-links', dependsOn: [root] }];
    for (let i = 1; i < 500; i++) requests.push({ type: 'dep.link', payload: i, queue: 'chain-links', dependsOn: [i - 1] });
    const links = await queue.enqueueMany(requests);
    await finishOne('chain', 'fail');
    const { rows } = await pool.query<{ state: string; n: string }>(
      'SELECT state, count(*) AS n FROM workhorse.job_outcome WHERE job_id = ANY ($1) GROUP BY state',
      [links],
    );
    expect(rows).toEqual([{ state: 'failed', n: '500' }]);
  });

  test('the dependent becomes ready in the very transaction that ends its last prerequisite (1,000 prerequisites)', async () => {
    const prereqs = await queue.enqueueMany(Array.from({ length: 1000 }, (_, i) => ({ type: 'dep.many', payload: i, queue: 'fanin' })));
    const c = await queue.enqueue('dep.sink', null, { queue: 'fanin-sink', dependsOn: prereqs });
    // All but the last, in batches of 333 (one complete_many_v1 each).
    for (let done = 0; done < 999; ) {
      const jobs = await claim(pool, 'fanin', { limit: Math.min(333, 999 - done) });
      await pool.query('SELECT * FROM workhorse.complete_many_v1($1, $2::jsonb)', [
        'test-worker',
        JSON.stringify(jobs.map((j) => ({ jobId: j.jobId, fence: Number(j.fence), result: null }))),
      ]);
      done += jobs.length;
      expect(await stateOf(pool, c)).toBe('blocked');
    }
    const last = await claimOne(pool, 'fanin');
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await complete(client, last);
      // Inside the transaction that ended the last prerequisite, before it commits.
      const inside = await client.query<{ state: string }>('SELECT state FROM workhorse.job_runtime WHERE job_id = $1', [c]);
      expect(inside.rows[0].state).toBe('ready');
      // Outside it, still blocked until the commit.
      expect(await stateOf(pool, c)).toBe('blocked');
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await stateOf(pool, c)).toBe('ready');
    await admin.cancel(c);
  });

  test('two prerequisites ending at once in two transactions: the second waits for the first and readies the dependent', async () => {
    const [a, b] = await queue.enqueueMany([
      { type: 'dep.a', payload: null, queue: 'race' },
      { type: 'dep.b', payload: null, queue: 'race' },
    ]);
    const c = await queue.enqueue('dep.c', null, { queue: 'race-c', dependsOn: [a, b] });
    const [ja, jb] = await claim(pool, 'race', { limit: 2 });
    const one = await pool.connect();
    const two = await pool.connect();
    try {
      await one.query('BEGIN');
      await two.query('BEGIN');
      await complete(one, ja);
      const pid = (await two.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const second = complete(two, jb);
      // `two` waits for `one`'s lock on the dependent.
      await waitFor(
        async () => (await pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", [pid])).rowCount === 1,
        10_000,
        'the second completion to wait for the first one\'s lock',
      );
      await one.query('COMMIT');
      await second;
      await two.query('COMMIT');
    } finally {
      one.release();
      two.release();
    }
    expect(await stateOf(pool, c)).toBe('ready');
    await admin.cancel(c);
  });

  test('enqueueMany: a request may depend on an earlier one of the same batch by index; in a caller transaction', async () => {
    const client = await pool.connect();
    let ids: string[];
    try {
      await client.query('BEGIN');
      ids = await queue.enqueueMany(
        [
          { type: 'dep.first', payload: null, queue: 'batch' },
          { type: 'dep.second', payload: null, queue: 'batch' },
          { type: 'dep.join', payload: null, queue: 'batch-join', dependsOn: [0, 1] },
        ],
        client,
      );
      const later = await queue.enqueue('dep.after', null, { queue: 'batch-join', dependsOn: [ids[2]] }, client);
      ids.push(later);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect((await admin.getJob(ids[2]))?.dependencies.map((l) => l.id)).toEqual([ids[0], ids[1]]);
    expect(await stateOf(pool, ids[3])).toBe('blocked');
    for (const id of ids) await admin.cancel(id);
    // Canceling the prerequisites canceled the dependents (policy `cancel`).
    expect((await admin.getJob(ids[3]))?.state).toBe('canceled');
  });

  test('ctx.dependencies() gives each prerequisite with its state and result or error', async () => {
    const [ok, bad] = await queue.enqueueMany([
      { type: 'dep.ok', payload: null, queue: 'ctxdep' },
      { type: 'dep.bad', payload: null, queue: 'ctxdep-bad' },
    ]);
    const c = await queue.enqueue('dep.reader', null, { queue: 'ctxdep-c', dependsOn: [ok, bad], onDependencyFailed: 'run' });
    await finishOne('ctxdep');
    await finishOne('ctxdep-bad', 'fail');
    let seen: DependencyOutcome[] = [];
    const worker = new Worker(queue, { queues: ['ctxdep-c'], pollMs: 50 });
    worker.handle('dep.reader', async (_payload, ctx) => {
      seen = await ctx.dependencies();
      return seen.length;
    });
    await worker.runOnce();
    expect(seen).toEqual([
      { jobId: ok, state: 'succeeded', result: { from: ok }, error: null },
      { jobId: bad, state: 'failed', result: null, error: { name: 'Boom', message: 'no' } },
    ]);
    expect(await stateOf(pool, c)).toBe('succeeded');
  });

  test('a prerequisite failed by its deadline or recovered to failed settles its dependents too', async () => {
    const a = await queue.enqueue('dep.late', null, { queue: 'dl', deadline: new Date(Date.now() + 1500) });
    const c = await queue.enqueue('dep.c', null, { queue: 'dl-c', dependsOn: [a] });
    await waitFor(
      async () => {
        await pool.query('SELECT workhorse.tick_v1()');
        return (await stateOf(pool, a)) === 'failed';
      },
      15_000,
      'the deadline to fail the prerequisite',
    );
    expect((await admin.getJob(c))?.error).toMatchObject({ name: 'DependencyFailed', prerequisiteId: a });
  });
});

describe('a 10,000-job graph of chains and diamonds', () => {
  test('resolves completely with two workers, each job after all its prerequisites, each exactly once', async () => {
    // 250 units of 40 jobs: a chain of 20, then 5 diamonds (top -> 2 sides -> bottom) hanging off it.
    const ids: string[] = [];
    const prereqsOf = new Map<string, string[]>();
    for (let unit = 0; unit < 250; unit++) {
      const requests: EnqueueRequest[] = [];
      for (let i = 0; i < 20; i++) requests.push({ type: 'graph.node', payload: null, queue: 'graph', ...(i > 0 ? { dependsOn: [i - 1] } : {}) });
      for (let d = 0; d < 5; d++) {
        const top = requests.length;
        requests.push({ type: 'graph.node', payload: null, queue: 'graph', dependsOn: [19] });
        requests.push({ type: 'graph.node', payload: null, queue: 'graph', dependsOn: [top] });
        requests.push({ type: 'graph.node', payload: null, queue: 'graph', dependsOn: [top] });
        requests.push({ type: 'graph.node', payload: null, queue: 'graph', dependsOn: [top + 1, top + 2] });
      }
      const batch = await queue.enqueueMany(requests);
      requests.forEach((r, i) => prereqsOf.set(batch[i], ((r.dependsOn ?? []) as number[]).map((k) => batch[k])));
      ids.push(...batch);
    }
    expect(ids).toHaveLength(10_000);
    const runs = new Map<string, number>();
    const workers = [0, 1].map(() => {
      const worker = new Worker(queue, { queues: ['graph'], concurrency: 20, pollMs: 20 });
      worker.handle('graph.node', (_payload, ctx) => {
        runs.set(ctx.jobId, (runs.get(ctx.jobId) ?? 0) + 1);
        return null;
      });
      return worker;
    });
    const running = workers.map((w) => w.run());
    try {
      await waitFor(
        async () => {
          const { rows } = await pool.query<{ n: string }>("SELECT count(*) AS n FROM workhorse.job_runtime WHERE queue = 'graph'");
          return Number(rows[0].n) === 0;
        },
        180_000,
        'all 10,000 jobs to end',
      );
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
      await Promise.all(running);
    }
    const { rows } = await pool.query<{ job_id: string; state: string; claimed: Date; finished: Date }>(
      "SELECT o.job_id, o.state, o.finished_at AS finished, (SELECT min(e.at) FROM workhorse.job_event e WHERE e.job_id = o.job_id AND e.kind = 'claimed') AS claimed " +
        'FROM workhorse.job_outcome o WHERE o.job_id = ANY ($1)',
      [ids],
    );
    const byId = new Map(rows.map((r) => [r.job_id, r]));
    expect(rows.every((r) => r.state === 'succeeded')).toBe(true);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(runs.size).toBe(10_000);
    for (const [id, prereqs] of prereqsOf) {
      const claimed = byId.get(id)?.claimed as Date;
      for (const p of prereqs) expect(claimed.getTime()).toBeGreaterThanOrEqual((byId.get(p)?.finished as Date).getTime());
    }
  }, 240_000);
});

describe('hostile input: a typed error naming the field, and nothing written', () => {
  test.each([
    ['an unknown id', () => ({ dependsOn: ['00000000-0000-7000-8000-000000000000'] }), UnknownDependencyError, 'dependsOn[0]'],
    ['too many ids', () => ({ dependsOn: Array.from({ length: 1001 }, () => '00000000-0000-7000-8000-000000000000') }), WorkhorseValidationError, 'dependsOn'],
    ['no ids', () => ({ dependsOn: [] }), WorkhorseValidationError, 'dependsOn'],
    ['a duplicate id', () => ({ dependsOn: ['00000000-0000-7000-8000-000000000001', '00000000-0000-7000-8000-000000000001'] }), WorkhorseValidationError, 'dependsOn[1]'],
    ['not a uuid', () => ({ dependsOn: ['nope'] }), WorkhorseValidationError, 'dependsOn[0]'],
    ['an index outside a batch', () => ({ dependsOn: [0] }), WorkhorseValidationError, 'dependsOn[0]'],
    ['a policy without dependsOn', () => ({ onDependencyFailed: 'run' }), WorkhorseValidationError, 'onDependencyFailed'],
    ['a bad policy', () => ({ dependsOn: ['00000000-0000-7000-8000-000000000001'], onDependencyCanceled: 'ignore' }), WorkhorseValidationError, 'onDependencyCanceled'],
  ])('%s (client side, and the SQL function on its own)', async (_what, options, type, field) => {
    const before = await counts();
    const opts = options() as Record<string, unknown>;
    const error = await queue.enqueue('dep.x', { big: 'x'.repeat(100_000) }, opts).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(type);
    expect((error as WorkhorseValidationError).field).toBe(field);
    // The same request straight to SQL, past the client's checks.
    const sqlError = await pool
      .query('SELECT * FROM workhorse.enqueue_many_v1($1::jsonb)', [JSON.stringify([{ type: 'dep.x', payload: null, ...opts }])])
      .catch((e: { code?: string; column?: string }) => e);
    expect((sqlError as { code?: string }).code).toMatch(/^P10(01|20)$/);
    expect((sqlError as { column?: string }).column).toBe(`requests[0].${field}`);
    expect(await counts()).toEqual(before);
  });

  test('an unknown id late in a batch rolls back the whole batch', async () => {
    const before = await counts();
    const error = await queue
      .enqueueMany([
        { type: 'dep.ok', payload: null, queue: 'hostile' },
        { type: 'dep.x', payload: 'x'.repeat(500_000), queue: 'hostile', dependsOn: [0, '00000000-0000-7000-8000-00000000abcd'] },
      ])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnknownDependencyError);
    expect(error).toMatchObject({ field: 'requests[1].dependsOn[1]', jobId: '00000000-0000-7000-8000-00000000abcd' });
    expect(await counts()).toEqual(before);
  });
});
