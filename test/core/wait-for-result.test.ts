/**
 * Issue 34 item 3: `queue.waitForResult` answers a job's result (or its typed end) across
 * processes, woken by the notification of every kind of end, with polling as the fallback; many
 * waiters share one LISTEN connection and batched reads; a producer learns nothing of other
 * roles' jobs; a job nobody awaits notifies nothing.
 */
import { Client } from 'pg';
import {
  grantRole,
  JobCanceledError,
  JobFailedError,
  JobNotFoundError,
  JobResultCanceledError,
  Queue,
  WaitForResultTimeoutError,
  Worker,
  WorkhorseValidationError,
} from '../../lib/core';
import { AWAIT_RESULTS } from '../../lib/core/protocol/producer';
import { ResultWaiters } from '../../lib/core/result-waiters';
import { FixtureProcesses, waitForLine } from '../support/fixture-process';
import { claim, claimOne, complete, fail, forceExpire } from '../support/protocol';
import { poolFor } from '../support/roles';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const children = new FixtureProcesses();
const opened: { end(): Promise<void> }[] = [];
const { db, pool, queue, admin, roles } = useTestDatabase({
  afterEachTest: async () => {
    for (const thing of opened.splice(0)) await thing.end().catch(() => undefined);
  },
  beforeDrop: () => children.killAll(),
});

/** Waiters whose poll never fires within a test: what wakes them is the notification. */
function notifiedOnly(): ResultWaiters {
  return new ResultWaiters(pool, 600_000);
}

async function listeners(): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN workhorse_results'",
  );
  return rows[0].n;
}

async function registered(id: string): Promise<boolean> {
  return (await pool.query('SELECT 1 FROM workhorse.result_waiter WHERE job_id = $1', [id])).rowCount === 1;
}

/** Resolves once the job is registered, that is once the wait's first read committed. */
function untilRegistered(id: string): Promise<boolean> {
  return waitFor(() => registered(id), 5_000, `a registration of ${id}`);
}

describe('the answer', () => {
  it('a job that already succeeded answers its result at once', async () => {
    const id = await queue.enqueue('results.done', { n: 1 }, { queue: 'results-done' });
    await complete(pool, await claimOne(pool, 'results-done'), { total: 42 });
    await expect(queue.waitForResult(id)).resolves.toEqual({ total: 42 });
    await expect(queue.waitForResult(id, { timeoutMs: 0 })).resolves.toEqual({ total: 42 });
    expect(await registered(id)).toBe(false);
    expect(await listeners()).toBe(0);
  });

  it('a dead job rejects with JobFailedError carrying its stored envelope; a canceled one with JobResultCanceledError', async () => {
    const dead = await queue.enqueue('results.dead', {}, { queue: 'results-dead', maxAttempts: 1 });
    await fail(pool, await claimOne(pool, 'results-dead'), { name: 'TypeError', message: 'no such invoice' });
    const error = await queue.waitForResult(dead).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    expect(error).toMatchObject({ jobId: dead, state: 'failed', jobError: { name: 'TypeError', message: 'no such invoice' } });

    const canceled = await queue.enqueue('results.canceled', {}, { queue: 'results-canceled' });
    await admin.cancel(canceled, { actor: 'alice', reason: 'duplicate order' });
    const refusal = await queue.waitForResult(canceled).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(JobResultCanceledError);
    expect(refusal).toBeInstanceOf(JobCanceledError);
    expect((refusal as JobResultCanceledError).jobError).toMatchObject({ name: 'Canceled', message: 'duplicate order' });
  });

  it('bad input is refused before anything is sent', async () => {
    await expect(queue.waitForResult('nope')).rejects.toThrow(WorkhorseValidationError);
    const id = await queue.enqueue('results.input', {}, { queue: 'results-input' });
    await expect(queue.waitForResult(id, { timeoutMs: -1 })).rejects.toMatchObject({ field: 'timeoutMs' });
    await expect(queue.waitForResult(id, { timeoutMs: 1.5 })).rejects.toMatchObject({ field: 'timeoutMs' });
    expect(await registered(id)).toBe(false);
    await admin.cancel(id);
  });

  it('after timeoutMs the wait rejects with WaitForResultTimeoutError and the job goes on; a later wait answers', async () => {
    const id = await queue.enqueue('results.slow', {}, { queue: 'results-slow' });
    const started = Date.now();
    await expect(queue.waitForResult(id, { timeoutMs: 0 })).rejects.toThrow(WaitForResultTimeoutError);
    await expect(queue.waitForResult(id, { timeoutMs: 150 })).rejects.toThrow(WaitForResultTimeoutError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect((await admin.getJob(id))?.state).toBe('ready');
    const later = queue.waitForResult(id, { timeoutMs: 10_000 });
    await complete(pool, await claimOne(pool, 'results-slow'), 'late');
    await expect(later).resolves.toBe('late');
  });

  it('an aborted signal rejects with its reason (AbortError), before and during the wait', async () => {
    const id = await queue.enqueue('results.abort', {}, { queue: 'results-abort' });
    await expect(queue.waitForResult(id, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
    const controller = new AbortController();
    const waiting = queue.waitForResult(id, { signal: controller.signal });
    await untilRegistered(id);
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
    await waitFor(async () => (await listeners()) === 0, 5_000, 'the listener to close with the last wait');
    await admin.cancel(id);
  });
});

describe('every kind of end wakes the waiter by its notification', () => {
  let waiters: ResultWaiters;
  beforeEach(() => {
    waiters = notifiedOnly();
  });

  async function awaiting(queueName: string, options: object = {}): Promise<{ id: string; settled: Promise<unknown> }> {
    const id = await queue.enqueue('results.end', {}, { queue: queueName, ...options });
    const settled = waiters.wait(id, { timeoutMs: 4_000 }).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    await untilRegistered(id);
    return { id, settled };
  }

  it('complete (complete_and_claim_v1), and the registration goes with the end', async () => {
    const { id, settled } = await awaiting('results-end-complete');
    await complete(pool, await claimOne(pool, 'results-end-complete'), { ok: true });
    expect(await settled).toEqual({ value: { ok: true } });
    expect(await registered(id)).toBe(false);
  });

  it('a batch of completions by a worker (complete_many through the worker)', async () => {
    const ids = await queue.enqueueMany([1, 2, 3].map((n) => ({ type: 'results.batch', payload: { n }, queue: 'results-end-batch' })));
    const settled = Promise.all(ids.map((id) => waiters.wait(id)));
    await Promise.all(ids.map((id) => untilRegistered(id)));
    const worker = new Worker(queue, { queues: ['results-end-batch'], concurrency: 3, listen: false });
    worker.handle('results.batch', async (payload: { n: number }) => payload.n * 10);
    await worker.runOnce();
    await expect(settled).resolves.toEqual([10, 20, 30]);
  });

  it('fail to dead (fail_v1)', async () => {
    const { settled } = await awaiting('results-end-fail', { maxAttempts: 1 });
    await fail(pool, await claimOne(pool, 'results-end-fail'), { name: 'Error', message: 'boom' });
    expect(await settled).toEqual({ error: expect.any(JobFailedError) });
  });

  it('a cancel of a waiting job by an operator (cancel_v1)', async () => {
    const { id, settled } = await awaiting('results-end-cancel');
    await admin.cancel(id, { actor: 'ops', reason: 'not needed' });
    expect(await settled).toEqual({ error: expect.any(JobResultCanceledError) });
  });

  it('a cancel of a running job that its worker acknowledges, and one that wins over the result', async () => {
    const first = await awaiting('results-end-ack');
    const second = await awaiting('results-end-ack');
    const [a, b] = await claim(pool, 'results-end-ack', { limit: 2 });
    await admin.cancel(first.id);
    await admin.cancel(second.id);
    const acknowledged = a.jobId === first.id ? a : b;
    const completed = a.jobId === first.id ? b : a;
    await pool.query('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3)', [acknowledged.jobId, acknowledged.workerId, acknowledged.fence]);
    expect(await complete(pool, completed, 'too late')).toBe('canceled');
    expect(await first.settled).toEqual({ error: expect.any(JobResultCanceledError) });
    expect(await second.settled).toEqual({ error: expect.any(JobResultCanceledError) });
  });

  it('an expired lease with no attempt left (recover_expired_v1)', async () => {
    const { id, settled } = await awaiting('results-end-expire', { maxAttempts: 1 });
    await claimOne(pool, 'results-end-expire');
    await forceExpire(pool, id);
    await pool.query('SELECT workhorse.recover_expired_v1(1000)');
    expect(await settled).toEqual({ error: expect.any(JobFailedError) });
  });

  it('a deadline that passed (expire_deadlines_v1)', async () => {
    const { id, settled } = await awaiting('results-end-deadline', { deadline: new Date(Date.now() + 3_600_000) });
    await pool.query("UPDATE workhorse.job_runtime SET deadline = clock_timestamp() - interval '1 second' WHERE job_id = $1", [id]);
    await pool.query('SELECT workhorse.expire_deadlines_v1(1000)');
    expect(await settled).toEqual({ error: expect.any(JobFailedError) });
  });

  it("a dependent failed by its prerequisite's failure (settle_dependents, policy fail)", async () => {
    const prerequisite = await queue.enqueue('results.pre', {}, { queue: 'results-end-dep', maxAttempts: 1 });
    const { settled } = await awaiting('results-end-dependent', { dependsOn: [prerequisite] });
    await fail(pool, await claimOne(pool, 'results-end-dep'), { name: 'Error', message: 'prerequisite broke' });
    expect(await settled).toEqual({ error: expect.objectContaining({ state: 'failed', jobError: expect.objectContaining({ name: 'DependencyFailed' }) }) });
  });

  it("a parent's cancel that cancels its children (cancel_children)", async () => {
    const parent = await queue.enqueue('results.parent', {}, { queue: 'results-end-parent' });
    const worker = new Worker(queue, { queues: ['results-end-parent'], concurrency: 1, listen: false });
    worker.handle('results.parent', async (_payload: unknown, ctx) => ctx.runChild('child', 'results.child', {}, { queue: 'results-end-child' }));
    await worker.runOnce();
    const { rows } = await pool.query<{ id: string }>(
      "SELECT prerequisite_id AS id FROM workhorse.job_dependency WHERE dependent_id = $1 AND kind = 'child'",
      [parent],
    );
    expect(rows).toHaveLength(1);
    const settled = waiters.wait(rows[0].id).catch((e: unknown) => e);
    await untilRegistered(rows[0].id);
    await admin.cancel(parent);
    expect(await settled).toBeInstanceOf(JobResultCanceledError);
  });
});

describe('the fallback and the cost', () => {
  it('a lost notification (the registration gone) is caught by the poll', async () => {
    const waiters = new ResultWaiters(pool, 200);
    const id = await queue.enqueue('results.lost', {}, { queue: 'results-lost' });
    const settled = waiters.wait(id);
    await untilRegistered(id);
    await pool.query('DELETE FROM workhorse.result_waiter WHERE job_id = $1', [id]);
    await complete(pool, await claimOne(pool, 'results-lost'), 'polled');
    await expect(settled).resolves.toBe('polled');
  });

  it('a killed listener connection is reopened, and the wait still answers', async () => {
    const waiters = new ResultWaiters(pool, 300);
    const id = await queue.enqueue('results.reconnect', {}, { queue: 'results-reconnect' });
    const settled = waiters.wait(id);
    await untilRegistered(id);
    await pool.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN workhorse_results'");
    await complete(pool, await claimOne(pool, 'results-reconnect'), 'after reconnect');
    await expect(settled).resolves.toBe('after reconnect');
  });

  it('an unreachable database ends a wait at its timeout, not later', async () => {
    const unreachable = poolFor('postgres://nobody@127.0.0.1:1/nothing', 1);
    opened.push(unreachable);
    const started = Date.now();
    await expect(new Queue(unreachable).waitForResult('00000000-0000-4000-8000-000000000000', { timeoutMs: 300 })).rejects.toThrow(
      WaitForResultTimeoutError,
    );
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('a job nobody awaits notifies nothing when it ends', async () => {
    const listener = new Client({ connectionString: db.url });
    await listener.connect();
    opened.push(listener);
    const heard: string[] = [];
    listener.on('notification', (message) => heard.push(`${message.channel}:${message.payload}`));
    await listener.query('LISTEN workhorse_results');
    const id = await queue.enqueue('results.unawaited', {}, { queue: 'results-unawaited' });
    await complete(pool, await claimOne(pool, 'results-unawaited'), null);
    // A later awaited end is heard, so anything the first had sent would have arrived before it.
    const waiters = notifiedOnly();
    const awaited = await queue.enqueue('results.awaited', {}, { queue: 'results-unawaited' });
    const settled = waiters.wait(awaited);
    await untilRegistered(awaited);
    await complete(pool, await claimOne(pool, 'results-unawaited'), null);
    await settled;
    await waitFor(() => heard.length > 0, 5_000, 'the awaited end to be heard');
    expect(heard).toEqual([`workhorse_results:${awaited}`]);
    expect(heard.join()).not.toContain(id);
  });

  it('1,000 waiters in one process share one LISTEN connection and a handful of batched reads', async () => {
    const counted = poolFor(db.url, 10);
    opened.push(counted);
    const reads: number[] = [];
    const query = counted.query.bind(counted) as (...args: unknown[]) => unknown;
    (counted as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      if (args[0] === AWAIT_RESULTS) reads.push((args[1] as unknown[][])[0].length);
      return query(...args);
    };
    const producer = new Queue(counted);
    const ids: string[] = [];
    for (let i = 0; i < 1000; i += 500) {
      ids.push(...(await queue.enqueueMany(Array.from({ length: 500 }, (_, k) => ({ type: 'results.many', payload: { n: i + k }, queue: 'results-many' })))));
    }
    const started = Date.now();
    const all = Promise.all(ids.map((id) => producer.waitForResult<number>(id, { timeoutMs: 60_000 })));
    await waitFor(async () => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM workhorse.result_waiter')).rows[0].n === 1000, 10_000, 'all 1000 registered');
    expect(await listeners()).toBe(1);
    const registering = reads.length;
    const worker = new Worker(queue, { queues: ['results-many'], concurrency: 100, listen: false, pollMs: 10 });
    worker.handle('results.many', async (payload: { n: number }) => payload.n);
    const running = worker.run();
    const results = await all;
    await worker.stop();
    await running;
    expect(results).toEqual(ids.map((_, n) => n));
    const ms = Date.now() - started;
    // Every read asks for many ids at once: far fewer reads than waiters.
    expect(reads.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(2000);
    expect(reads.length).toBeLessThan(200);
    process.stdout.write(`1000 waiters: ${registering} registering reads, ${reads.length} reads in all, ${ms} ms from the first wait to the last answer\n`);
    expect(await listeners()).toBe(0);
  });
});

describe('who may wait for what', () => {
  it("a producer role learns nothing of another role's job: JobNotFoundError, no registration; its own job answers", async () => {
    const owner = await roles.create(db.url, 'wh_results_owner');
    const other = await roles.create(db.url, 'wh_results_other');
    await grantRole(db.pool, owner.name, 'producer');
    await grantRole(db.pool, other.name, 'producer');
    const ownerPool = poolFor(owner.url, 3);
    const otherPool = poolFor(other.url, 3);
    opened.push(ownerPool, otherPool);
    const [id, awaited] = await new Queue(ownerPool).enqueueMany([
      { type: 'results.private', payload: {}, queue: 'results-private' },
      { type: 'results.private', payload: {}, queue: 'results-private' },
    ]);
    const ownWait = new Queue(ownerPool).waitForResult(awaited, { timeoutMs: 10_000 });
    await untilRegistered(awaited);
    const foreign = await new Queue(otherPool).waitForResult(id).catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(JobNotFoundError);
    expect(await registered(id)).toBe(false);
    const unknown = await new Queue(otherPool).waitForResult('00000000-0000-4000-8000-000000000000').catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(JobNotFoundError);
    expect((foreign as Error).message.replace(id, 'ID')).toBe((unknown as Error).message.replace('00000000-0000-4000-8000-000000000000', 'ID'));
    for (const job of await claim(pool, 'results-private', { limit: 2 })) await complete(pool, job, 'mine');
    await expect(ownWait).resolves.toBe('mine');
    // The foreign job ended: still nothing revealed.
    await expect(new Queue(otherPool).waitForResult(id)).rejects.toThrow(JobNotFoundError);
  });
});

describe('across processes', () => {
  it('a worker in another process finishes the job; the waiting process wakes with its result or error', async () => {
    const child = children.start(require.resolve('../fixtures/result-worker.ts'), { RESULT_DATABASE_URL: db.url });
    await waitForLine(child, 'READY', 20_000);
    const waiters = notifiedOnly();
    const [doubled, refused] = await queue.enqueueMany([
      { type: 'results.double', payload: { n: 21 }, queue: 'results-cross' },
      { type: 'results.refuse', payload: {}, queue: 'results-cross' },
    ]);
    await expect(waiters.wait(doubled)).resolves.toEqual({ doubled: 42 });
    const error = await waiters.wait(refused).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    expect((error as JobFailedError).jobError.message).toBe('refused in another process');
    await children.killAll();
  });
});
