/**
 * Human decisions (`ctx.waitForHuman`, `admin.listHumanWaits`, `queue.completeHumanWait`):
 * parking, listing with context, decisions checked against choices, the timeline, idempotency,
 * timeouts, hostile input, and a worker process killed with SIGKILL while its job waits.
 */
import {
  DecisionNotAllowedError,
  HumanWaitTimeoutError,
  InvalidCursorError,
  Worker,
  WorkhorseValidationError,
  type HandlerContext,
  type HumanWait,
} from '../../lib/core';
import { sideEffects } from '../fixtures/side-effects';
import { registerWaitHandlers } from '../fixtures/wait-handlers';
import { expectRejects } from '../support/expect-rejects';
import { kill9, spawnWaitWorker, waitForLine } from '../support/wait-worker-process';
import { waitFor } from '../support/wait';
import { useWaitTestBed } from '../support/wait-test-bed';

const bed = useWaitTestBed({ concurrency: 5 });
const { pool, queue, admin, startWorker, waitForState } = bed;

const waitHandlers = (w: Worker) => registerWaitHandlers(w, pool, () => undefined, false);

/** The events of `jobId`, and every human wait's status and actor: what a refused decision must leave alone. */
async function writes(jobId: string): Promise<string> {
  const { rows } = await pool.query<{ n: string }>(
    "SELECT (SELECT count(*) FROM workhorse.job_event WHERE job_id = $1) || '/' || (SELECT string_agg(status || coalesce(actor, ''), ',' ORDER BY id) FROM workhorse.job_human_wait) AS n",
    [jobId],
  );
  return rows[0].n;
}

describe('waitForHuman and completeHumanWait', () => {
  it('parks the job, lists the wait with its context, refuses a decision outside the choices, and resumes on a decision', async () => {
    const q = 'human-basic';
    const jobId = await queue.enqueue('wait.human', {}, { queue: q });
    startWorker(q, waitHandlers);
    await waitForState(jobId, 'blocked');
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'blocked', currentAttempt: 1, workerId: null });
    // The worker reports the park as `job.blocked`, waiting for a human.
    await waitFor(() => bed.blockedEvents.length > 0, 5_000, 'the job.blocked event');
    expect(bed.blockedEvents).toEqual([
      { name: 'job.blocked', jobId, type: 'wait.human', queue: q, group: q, attempt: 1, workerId: `w-${q}`, waitingFor: 'human' },
    ]);

    const page = await admin.listHumanWaits({ queue: q });
    expect(page.items).toEqual([
      expect.objectContaining<Partial<HumanWait>>({
        jobId,
        queue: q,
        type: 'wait.human',
        name: 'approve',
        context: { amount: 1200 },
        choices: ['approve', 'reject'],
        timeoutAt: null,
        attempt: 1,
      }),
    ]);

    const before = await writes(jobId);
    const refused = await expectRejects(queue.completeHumanWait(jobId, 'approve', 'maybe', { actor: 'alice' }), DecisionNotAllowedError);
    expect(refused.field).toBe('decision');
    expect(refused.choices).toEqual(['approve', 'reject']);
    expect(await writes(jobId)).toBe(before);

    expect(await queue.completeHumanWait(jobId, 'approve', 'approve', { actor: 'alice', reason: 'loyal customer', idempotencyKey: 'd-1' })).toBe(
      'completed',
    );
    await waitForState(jobId, 'succeeded');
    expect((await admin.getJob(jobId))?.result).toMatchObject({ decision: 'approve', actor: 'alice', attempt: 1 });
    expect((await sideEffects(pool, jobId)).map((s) => s.stage)).toEqual(['a', 'b']);
    const decided = (await admin.getJobTimeline(jobId)).items.find((e) => e.kind === 'human_decided');
    expect(decided?.data).toEqual({ name: 'approve', context: { amount: 1200 }, decision: 'approve', actor: 'alice', reason: 'loyal customer' });
    expect((await admin.listHumanWaits({ queue: q })).items).toEqual([]);
    expect(await queue.completeHumanWait(jobId, 'approve', 'approve', { actor: 'alice', idempotencyKey: 'd-1' })).toBe('duplicate');
    expect(await queue.completeHumanWait(jobId, 'approve', 'reject', { actor: 'bob' })).toBe('already_decided');
  });

  it('pages the open waits exactly, oldest first, with filters', async () => {
    const q = 'human-paging';
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await queue.enqueue('wait.human', { i }, { queue: q }));
    startWorker(q, waitHandlers);
    for (const id of ids) await waitForState(id, 'blocked');
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await admin.listHumanWaits({ queue: q, limit: 2, cursor });
      seen.push(...page.items.map((w) => w.jobId));
      cursor = page.nextCursor ?? undefined;
      pages++;
    } while (cursor);
    expect(seen.sort()).toEqual([...ids].sort());
    expect(pages).toBe(3);
    expect((await admin.listHumanWaits({ jobId: ids[2] })).items.map((w) => w.jobId)).toEqual([ids[2]]);
    expect((await admin.listHumanWaits({ queue: q, name: 'other' })).items).toEqual([]);
    await expectRejects(admin.listHumanWaits({ cursor: 'bogus' }), InvalidCursorError);
    expect((await expectRejects(admin.listHumanWaits({ limit: 0 }), WorkhorseValidationError)).field).toBe('limit');
    for (const id of ids) expect(await queue.completeHumanWait(id, 'approve', 'reject', { actor: 'ops' })).toBe('completed');
    for (const id of ids) await waitForState(id, 'succeeded');
  });

  it('a timeout throws HumanWaitTimeoutError the handler can catch', async () => {
    const q = 'human-timeout';
    const jobId = await queue.enqueue('human.timeout', {}, { queue: q });
    startWorker(q, (w) =>
      w.handle('human.timeout', async (_p: unknown, ctx: HandlerContext) => {
        try {
          return await ctx.waitForHuman('sign-off', { context: 'please', timeoutMs: 400 });
        } catch (error) {
          if (!(error instanceof HumanWaitTimeoutError)) throw error;
          return { timedOut: error.waitName };
        }
      }),
    );
    await waitForState(jobId, 'succeeded');
    expect((await admin.getJob(jobId))?.result).toEqual({ timedOut: 'sign-off' });
    expect(await queue.completeHumanWait(jobId, 'sign-off', 'ok', { actor: 'late' })).toBe('timed_out');
  });

  it('a decision after the timeout, while no worker runs, answers timed_out: the wait is not listed, and the handler sees the timeout (issue 30.5)', async () => {
    const q = 'human-late';
    const jobId = await queue.enqueue('human.late', {}, { queue: q });
    const handle = (w: Worker) =>
      w.handle('human.late', async (_p: unknown, ctx: HandlerContext) => {
        try {
          return await ctx.waitForHuman('sign-off', { choices: ['ok', 'no'], timeoutMs: 300 });
        } catch (error) {
          if (!(error instanceof HumanWaitTimeoutError)) throw error;
          return { timedOut: error.waitName };
        }
      });
    const first = startWorker(q, handle, 'w-late-1');
    await waitFor(async () => (await admin.listHumanWaits({ jobId })).items.length === 1, 15_000, 'the wait to open');
    await first.stop();
    // The workers are down past the timeout: the job has not woken, but the deadline holds.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await admin.listHumanWaits({ jobId })).items).toEqual([]);
    const before = await writes(jobId);
    expect(await queue.completeHumanWait(jobId, 'sign-off', 'ok', { actor: 'late' })).toBe('timed_out');
    expect(await writes(jobId)).toBe(before);
    startWorker(q, handle, 'w-late-2');
    await waitForState(jobId, 'succeeded');
    expect((await admin.getJob(jobId))?.result).toEqual({ timedOut: 'sign-off' });
  });

  it('answers not_waiting, not_found and finished, and refuses hostile input with typed errors, writing nothing', async () => {
    const jobId = await queue.enqueue('human.none', {}, { queue: 'human-hostile' });
    const before = await writes(jobId);
    expect(await queue.completeHumanWait(jobId, 'approve', 'yes', { actor: 'a' })).toBe('not_waiting');
    expect(await queue.completeHumanWait('00000000-0000-7000-8000-000000000000', 'approve', 'yes', { actor: 'a' })).toBe('not_found');
    const field = async (promise: Promise<unknown>) => (await expectRejects(promise, WorkhorseValidationError)).field;
    expect(await field(queue.completeHumanWait(jobId, 'n'.repeat(201), 'yes', { actor: 'a' }))).toBe('name');
    expect(await field(queue.completeHumanWait(jobId, 'a\u0000', 'yes', { actor: 'a' }))).toBe('name');
    expect(await field(queue.completeHumanWait(jobId, 'approve', 'yes', { actor: '' }))).toBe('actor');
    expect(await field(queue.completeHumanWait(jobId, 'approve', 'yes', { actor: 'x'.repeat(201) }))).toBe('actor');
    expect(await field(queue.completeHumanWait(jobId, 'approve', 'yes', { actor: 'a', reason: 'r'.repeat(1001) }))).toBe('reason');
    expect(await field(queue.completeHumanWait(jobId, 'approve', 'x'.repeat(70_000), { actor: 'a' }))).toBe('decision');
    expect(await field(queue.completeHumanWait(jobId, 'approve', undefined, { actor: 'a' }))).toBe('decision');
    expect(await field(queue.completeHumanWait('nope', 'approve', 'yes', { actor: 'a' }))).toBe('jobId');
    await expect(pool.query("SELECT workhorse.complete_human_wait_v1($1, 'approve', '\"y\"', NULL)", [jobId])).rejects.toMatchObject({
      code: 'P1001',
      column: 'actor',
    });
    expect(await writes(jobId)).toBe(before);
    expect(await admin.cancel(jobId)).toBe('canceled');
    expect(await queue.completeHumanWait(jobId, 'approve', 'yes', { actor: 'a' })).toBe('finished');
  });

  it('refuses bad wait options in the handler before anything is written', async () => {
    const q = 'human-bad-options';
    const jobId = await queue.enqueue('human.bad', {}, { queue: q, maxAttempts: 1 });
    startWorker(q, (w) =>
      w.handle('human.bad', async (_p: unknown, ctx: HandlerContext) => {
        const errors: string[] = [];
        for (const options of [{ choices: [] }, { choices: ['a', 'a'] }, { choices: ['x'.repeat(201)] }, { timeoutMs: 0 }, { context: { s: 'x'.repeat(1_100_000) } }]) {
          await ctx.waitForHuman('h', options).catch((e: unknown) => errors.push(e instanceof WorkhorseValidationError ? e.field : String(e)));
        }
        return errors;
      }),
    );
    await waitForState(jobId, 'succeeded');
    expect((await admin.getJob(jobId))?.result).toEqual(['choices', 'choices', 'choices', 'timeoutMs', 'context']);
    const { rows } = await pool.query('SELECT 1 FROM workhorse.job_human_wait WHERE job_id = $1', [jobId]);
    expect(rows).toHaveLength(0);
  });
});

describe('waitForHuman with SIGKILL', () => {
  it('a worker killed while its job waits for a decision loses nothing; the decision resumes it elsewhere', async () => {
    const q = 'human-kill';
    const jobId = await queue.enqueue('wait.human', {}, { queue: q });
    const child = spawnWaitWorker(bed.url, q, 'human-kill-child', false);
    await waitForLine(child, `WAITING ${jobId}`);
    await kill9(child);
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'blocked', currentAttempt: 1 });

    expect(await queue.completeHumanWait(jobId, 'approve', 'approve', { actor: 'carol' })).toBe('completed');
    startWorker(q, waitHandlers, 'human-kill-survivor');
    await waitForState(jobId, 'succeeded');
    expect((await admin.getJob(jobId))?.result).toMatchObject({ a: `a-${child.process.pid}`, decision: 'approve', actor: 'carol', b: `b-${process.pid}` });
    expect((await sideEffects(pool, jobId)).map((s) => s.stage)).toEqual(['a', 'b']);
  });
});
