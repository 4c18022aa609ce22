/**
 * External signals (`ctx.waitForSignal`, `queue.sendSignal`, `wait_signal_v1`,
 * `send_signal_v1`): parking without consuming an attempt, delivery, buffering, idempotency,
 * timeouts, fencing, hostile input, and worker processes killed with SIGKILL at the park and
 * resume points.
 */
import {
  SignalTimeoutError,
  WorkhorseValidationError,
  type HandlerContext,
} from '../../lib/core';
import { sideEffects } from '../fixtures/side-effects';
import { registerWaitHandlers } from '../fixtures/wait-handlers';
import { expectRejects } from '../support/expect-rejects';
import { claimOne, forceExpire } from '../support/protocol';
import { kill9, spawnWaitWorker, waitForLine } from '../support/wait-worker-process';
import { waitFor } from '../support/wait';
import { useWaitTestBed } from '../support/wait-test-bed';

const bed = useWaitTestBed({ concurrency: 2 });
const { pool, queue, admin, startWorker, waitForState } = bed;

async function eventKinds(jobId: string): Promise<string[]> {
  return (await admin.getJobTimeline(jobId, { limit: 500 })).items.filter((e) => e.source === 'event').map((e) => e.kind);
}

/** Signals and events written for `jobId`, and signals for any job (a refused send writes none). */
async function signalRows(jobId: string): Promise<string> {
  const { rows } = await pool.query<{ n: string }>(
    `SELECT (SELECT count(*) FROM workhorse.job_signal WHERE job_id = $1) || '/' || (SELECT count(*) FROM workhorse.job_event WHERE job_id = $1)
            || '/' || (SELECT count(*) FROM workhorse.job_signal) AS n`,
    [jobId],
  );
  return rows[0].n;
}

describe('waitForSignal and sendSignal', () => {
  it('parks the job (blocked, slot freed, attempt kept) until the signal, then replays with checkpoints', async () => {
    const q = 'sig-basic';
    const jobId = await queue.enqueue('wait.signal', {}, { queue: q });
    const waiting: string[] = [];
    startWorker(q, (w) => registerWaitHandlers(w, pool, (line) => waiting.push(line), false));
    await waitForState(jobId, 'blocked');
    expect(waiting).toContain(`WAITING ${jobId}`);
    // The worker reports the park as `job.blocked`, waiting for a signal.
    await waitFor(() => bed.blockedEvents.length > 0, 5_000, 'the job.blocked event');
    expect(bed.blockedEvents).toEqual([
      { name: 'job.blocked', jobId, type: 'wait.signal', queue: q, group: q, attempt: 1, workerId: `w-${q}`, waitingFor: 'signal' },
    ]);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'blocked', currentAttempt: 1, workerId: null });

    expect(await queue.sendSignal(jobId, 'go', { trackingId: 'T-1' })).toBe('delivered');
    await waitForState(jobId, 'succeeded');
    const job = await admin.getJob(jobId);
    expect(job).toMatchObject({ currentAttempt: 1, result: { signal: { trackingId: 'T-1' }, attempt: 1 } });
    expect((await sideEffects(pool, jobId)).map((s) => s.stage)).toEqual(['a', 'b']);
    expect(await eventKinds(jobId)).toEqual([
      'enqueued', 'claimed', 'checkpoint_saved', 'waiting', 'signal_delivered', 'claimed', 'checkpoint_saved', 'succeeded',
    ]);
    // Once finished, a signal finds nothing to wake.
    expect(await queue.sendSignal(jobId, 'go', 1)).toBe('finished');
  });

  it('keeps a signal sent before the wait (buffered) and the wait consumes it without parking', async () => {
    const q = 'sig-buffered';
    const jobId = await queue.enqueue('wait.signal', {}, { queue: q });
    expect(await queue.sendSignal(jobId, 'go', 'early')).toBe('buffered');
    startWorker(q, (w) => registerWaitHandlers(w, pool, () => undefined, false));
    await waitForState(jobId, 'succeeded');
    expect((await admin.getJob(jobId))?.result).toMatchObject({ signal: 'early' });
    const kinds = await eventKinds(jobId);
    expect(kinds).toContain('signal_consumed');
    expect(kinds).not.toContain('waiting');
  });

  it('joins the caller transaction: a rolled-back send is never delivered', async () => {
    const jobId = await queue.enqueue('sig.tx', {}, { queue: 'sig-tx' });
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      expect(await queue.sendSignal(jobId, 'go', 1, {}, client)).toBe('buffered');
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    const { rows } = await pool.query('SELECT 1 FROM workhorse.job_signal WHERE job_id = $1', [jobId]);
    expect(rows).toHaveLength(0);
  });

  it('concurrent sends with one idempotency key: one is delivered, the others are duplicates', async () => {
    const q = 'sig-idem';
    const jobId = await queue.enqueue('wait.signal', {}, { queue: q });
    const worker = startWorker(q, (w) => registerWaitHandlers(w, pool, () => undefined, false));
    await waitForState(jobId, 'blocked');
    await worker.stop();
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => queue.sendSignal(jobId, 'go', { sender: i }, { idempotencyKey: 'ship-1' })),
    );
    expect(answers.filter((a) => a === 'delivered')).toHaveLength(1);
    expect(answers.filter((a) => a === 'duplicate')).toHaveLength(7);
    const { rows } = await pool.query('SELECT 1 FROM workhorse.job_signal WHERE job_id = $1', [jobId]);
    expect(rows).toHaveLength(1);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'ready' });
    startWorker(q, (w) => registerWaitHandlers(w, pool, () => undefined, false), 'sig-idem-2');
    await waitForState(jobId, 'succeeded');
  });

  it('the n-th wait for a name takes the n-th signal of that name', async () => {
    const q = 'sig-seq';
    const jobId = await queue.enqueue('sig.seq', {}, { queue: q });
    for (const n of [1, 2]) expect(await queue.sendSignal(jobId, 'tick', n)).toBe('buffered');
    startWorker(q, (w) =>
      w.handle('sig.seq', async (_p: unknown, ctx: HandlerContext) => {
        const values = [];
        for (let i = 0; i < 3; i++) values.push(await ctx.waitForSignal('tick'));
        return values;
      }),
    );
    await waitForState(jobId, 'blocked');
    expect(await queue.sendSignal(jobId, 'tick', 3)).toBe('delivered');
    await waitForState(jobId, 'succeeded');
    expect((await admin.getJob(jobId))?.result).toEqual([1, 2, 3]);
  });

  it('a timeout parks the job scheduled, then throws SignalTimeoutError the handler can catch', async () => {
    const q = 'sig-timeout';
    const jobId = await queue.enqueue('sig.timeout', {}, { queue: q });
    startWorker(q, (w) =>
      w.handle('sig.timeout', async (_p: unknown, ctx: HandlerContext) => {
        try {
          return await ctx.waitForSignal('never', { timeoutMs: 400 });
        } catch (error) {
          if (!(error instanceof SignalTimeoutError)) throw error;
          return { timedOut: error.signalName, attempt: ctx.attempt };
        }
      }),
    );
    await waitForState(jobId, 'succeeded');
    expect((await admin.getJob(jobId))?.result).toEqual({ timedOut: 'never', attempt: 1 });
    const kinds = await eventKinds(jobId);
    expect(kinds).toEqual(expect.arrayContaining(['waiting', 'wait_timed_out']));
    const waiting = (await admin.getJobTimeline(jobId)).items.find((e) => e.kind === 'waiting');
    expect(waiting?.data).toMatchObject({ waitFor: 'signal', name: 'never', state: 'scheduled' });
  });

  it('is fenced: a stale owner can neither park nor consume', async () => {
    const q = 'sig-fence';
    const jobId = await queue.enqueue('sig.fence', {}, { queue: q });
    expect(await queue.sendSignal(jobId, 'go', 'kept')).toBe('buffered');
    const claimed = await claimOne(pool, q);
    const call = (fence: string) =>
      pool.query<{ status: string }>('SELECT status FROM workhorse.wait_signal_v1($1, $2, $3, $4, 1, NULL)', [
        jobId,
        claimed.workerId,
        fence,
        'go',
      ]);
    expect((await call(String(BigInt(claimed.fence) + 1n))).rows[0].status).toBe('stale');
    await forceExpire(pool, jobId);
    expect((await call(claimed.fence)).rows[0].status).toBe('stale');
    // Nothing was consumed or opened: the signal still waits for a wait.
    const { rows } = await pool.query('SELECT wait_seq FROM workhorse.job_signal WHERE job_id = $1', [jobId]);
    expect(rows).toEqual([{ wait_seq: null }]);
    const { rows: waits } = await pool.query('SELECT 1 FROM workhorse.job_signal_wait WHERE job_id = $1', [jobId]);
    expect(waits).toHaveLength(0);
    await admin.cancel(jobId);
  });

  it('refuses hostile input with typed errors and writes nothing', async () => {
    const jobId = await queue.enqueue('sig.hostile', {}, { queue: 'sig-hostile' });
    const before = await signalRows(jobId);
    expect((await expectRejects(queue.sendSignal(jobId, 'x'.repeat(201)), WorkhorseValidationError)).field).toBe('name');
    expect((await expectRejects(queue.sendSignal(jobId, 'a\u0000b'), WorkhorseValidationError)).field).toBe('name');
    expect((await expectRejects(queue.sendSignal(jobId, ''), WorkhorseValidationError)).field).toBe('name');
    expect((await expectRejects(queue.sendSignal(jobId, 'go', { s: 'x'.repeat(1_100_000) }), WorkhorseValidationError)).field).toBe(
      'payload',
    );
    expect((await expectRejects(queue.sendSignal(jobId, 'go', { s: 'a\u0000' }), WorkhorseValidationError)).field).toBe('payload.s');
    expect((await expectRejects(queue.sendSignal('not-a-uuid', 'go'), WorkhorseValidationError)).field).toBe('jobId');
    expect(
      (await expectRejects(queue.sendSignal(jobId, 'go', 1, { idempotencyKey: 'k'.repeat(201) }), WorkhorseValidationError)).field,
    ).toBe('idempotencyKey');
    // The SQL function refuses the same things on its own (other SDKs call it directly).
    await expect(pool.query("SELECT workhorse.send_signal_v1($1, repeat('x', 201), NULL)", [jobId])).rejects.toMatchObject({
      code: 'P1001',
      column: 'name',
    });
    expect(await queue.sendSignal('00000000-0000-7000-8000-000000000000', 'go')).toBe('not_found');
    expect(await signalRows(jobId)).toBe(before);
    await admin.cancel(jobId);
  });

  it('a canceled parked job ends canceled and its attempt closes', async () => {
    const q = 'sig-cancel';
    const jobId = await queue.enqueue('wait.signal', {}, { queue: q });
    startWorker(q, (w) => registerWaitHandlers(w, pool, () => undefined, false));
    await waitForState(jobId, 'blocked');
    expect(await admin.cancel(jobId)).toBe('canceled');
    expect(await queue.sendSignal(jobId, 'go')).toBe('finished');
  });
});

describe('waitForSignal with SIGKILL', () => {
  it('a worker killed while its job is parked loses nothing: the signal resumes it elsewhere', async () => {
    const q = 'sig-kill-park';
    const jobId = await queue.enqueue('wait.signal', {}, { queue: q });
    const child = spawnWaitWorker(bed.url, q, 'sig-kill-park-child', false);
    await waitForLine(child, `WAITING ${jobId}`);
    await kill9(child);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'blocked', currentAttempt: 1, workerId: null });

    expect(await queue.sendSignal(jobId, 'go', 'after-kill')).toBe('delivered');
    startWorker(q, (w) => registerWaitHandlers(w, pool, () => undefined, false), 'sig-kill-park-survivor');
    await waitForState(jobId, 'succeeded');
    const job = await admin.getJob(jobId);
    expect(job?.result).toMatchObject({ a: `a-${child.process.pid}`, signal: 'after-kill', b: `b-${process.pid}`, attempt: 1 });
    expect((await sideEffects(pool, jobId)).map((s) => s.stage)).toEqual(['a', 'b']);
  });

  it.each([
    ['before-wait', 'active'],
    ['after-wait', 'blocked'],
  ])('a worker that kills itself at %s (SIGKILL) loses nothing; stage a never reruns', async (point, stateAfterKill) => {
    const q = `sig-failpoint-${point}`;
    const jobId = await queue.enqueue('wait.signal', {}, { queue: q, maxAttempts: 3 });
    const child = spawnWaitWorker(bed.url, q, `${q}-child`, false, `${point}:1`);
    await child.exited;
    expect(child.process.signalCode).toBe('SIGKILL');
    const job = await admin.getJob(jobId);
    expect(job?.state).toBe(stateAfterKill);
    // Before the wait committed the job is still the dead worker's: its lease runs out (made so here).
    if (stateAfterKill === 'active') await forceExpire(pool, jobId);

    startWorker(q, (w) => registerWaitHandlers(w, pool, () => undefined, false), `${q}-survivor`);
    await waitForState(jobId, 'blocked');
    expect(await queue.sendSignal(jobId, 'go', point)).toBe('delivered');
    await waitForState(jobId, 'succeeded');
    expect((await admin.getJob(jobId))?.result).toMatchObject({ a: `a-${child.process.pid}`, signal: point });
    expect((await sideEffects(pool, jobId)).map((s) => s.stage)).toEqual(['a', 'b']);
  });

  it('a worker killed right after the wait answered: the next run gets the same signal, stage a never reruns', async () => {
    const q = 'sig-kill-resume';
    const jobId = await queue.enqueue('wait.signal', {}, { queue: q, maxAttempts: 3 });
    const first = spawnWaitWorker(bed.url, q, 'sig-kill-resume-1', true);
    await waitForLine(first, `WAITING ${jobId}`);
    expect(await queue.sendSignal(jobId, 'go', 'once')).toBe('delivered');
    await waitForLine(first, `RESUMED ${jobId}`);
    await kill9(first);
    // The dead worker's lease would lapse on its own; the test need not wait for the clock.
    await forceExpire(pool, jobId);

    startWorker(q, (w) => registerWaitHandlers(w, pool, () => undefined, false), 'sig-kill-resume-survivor');
    await waitForState(jobId, 'succeeded');
    const job = await admin.getJob(jobId);
    expect(job?.result).toMatchObject({ a: `a-${first.process.pid}`, signal: 'once', b: `b-${process.pid}` });
    expect((await sideEffects(pool, jobId)).map((s) => s.stage)).toEqual(['a', 'b']);
    // One signal, consumed once.
    const { rows } = await pool.query('SELECT wait_seq FROM workhorse.job_signal WHERE job_id = $1', [jobId]);
    expect(rows).toEqual([{ wait_seq: 1 }]);
  });
});

