/**
 * A job's signals and waits as operators read them (`admin.listJobSignals`,
 * `admin.listJobWaits`), and an operator's decision (`admin.completeHumanWait`): each read
 * follows the job through a signal wait, a buffered signal and a human decision.
 */
import { DecisionNotAllowedError, Worker, WorkhorseValidationError } from '../../lib/core';
import { useTestDatabase } from '../support/test-database';

const { queue, admin } = useTestDatabase({ checkInvariants: false });

it('lists a job\u2019s signals and waits as the handler meets them, and records an operator\u2019s decision', async () => {
  const worker = new Worker(queue, { queues: ['flows'] }).handle('flow.run', async (_payload, ctx) => {
    const go = await ctx.waitForSignal('go', { timeoutMs: 3_600_000 });
    const approval = await ctx.waitForHuman<string>('approve', { context: { amount: 42 }, choices: ['yes', 'no'] });
    return { go, decision: approval.decision };
  });
  const id = await queue.enqueue('flow.run', {}, { queue: 'flows' });
  expect(await admin.listJobWaits(id)).toEqual([]);
  await worker.runOnce();
  const [signalWait] = await admin.listJobWaits(id);
  expect(signalWait).toMatchObject({ kind: 'signal', name: 'go', seq: 1, status: 'open', attempt: 1, resolvedAt: null, signalId: null });
  expect(signalWait.timeoutAt?.getTime()).toBeGreaterThan(Date.now() + 3_500_000);

  expect(await queue.sendSignal(id, 'go', { n: 1 })).toBe('delivered');
  expect(await queue.sendSignal(id, 'later', '<b>kept</b>')).toBe('buffered');
  const signals = await admin.listJobSignals(id);
  expect(signals.map((s) => [s.name, s.status, s.waitSeq, s.payload])).toEqual([
    ['later', 'buffered', null, '<b>kept</b>'],
    ['go', 'consumed', 1, { n: 1 }],
  ]);
  expect(await admin.listJobSignals(id, { limit: 1 })).toHaveLength(1);

  await worker.runOnce();
  const waits = await admin.listJobWaits(id);
  expect(waits.map((w) => [w.kind, w.name, w.status])).toEqual([
    ['human', 'approve', 'open'],
    ['signal', 'go', 'delivered'],
  ]);
  expect(waits[0]).toMatchObject({ context: { amount: 42 }, choices: ['yes', 'no'], timeoutAt: null, decision: null });
  expect(waits[1].signalId).toBe(signals[1].id);

  await expect(admin.completeHumanWait(id, 'approve', 'maybe', { actor: 'ops:ada' })).rejects.toBeInstanceOf(DecisionNotAllowedError);
  expect(await admin.completeHumanWait(id, 'approve', 'yes', { actor: 'ops:ada', reason: 'checked' })).toBe('completed');
  expect(await admin.completeHumanWait(id, 'approve', 'no', { actor: 'ops:bob' })).toBe('already_decided');
  await worker.runOnce();
  expect(await admin.getJob(id)).toMatchObject({ state: 'succeeded', result: { go: { n: 1 }, decision: 'yes' } });
  expect((await admin.listJobWaits(id, { limit: 1 }))[0]).toMatchObject({ status: 'decided', decision: 'yes', actor: 'ops:ada', reason: 'checked' });
});

it('names the bad argument', async () => {
  const id = await queue.enqueue('flow.run', {}, { queue: 'flows-bad' });
  for (const [call, field] of [
    [() => admin.listJobWaits('nope'), 'jobId'],
    [() => admin.listJobSignals(id, { limit: 0 }), 'limit'],
    [() => admin.listJobWaits(id, { limit: 1001 }), 'limit'],
    [() => admin.listJobWaits(id, { max: 1 } as never), 'max'],
  ] as const) {
    await expect(call()).rejects.toMatchObject({ constructor: WorkhorseValidationError, field });
  }
});

it('reads a wait past its timeout as timed_out by the database clock, before its job wakes to record it', async () => {
  const worker = new Worker(queue, { queues: ['flows-late'] }).handle('flow.late', async (_payload, ctx) => {
    const approval = await ctx.waitForHuman<string>('approve', { choices: ['yes', 'no'], timeoutMs: 300 });
    return { decision: approval.decision };
  });
  const id = await queue.enqueue('flow.late', {}, { queue: 'flows-late' });
  await worker.runOnce();
  expect((await admin.listJobWaits(id)).map((w) => [w.kind, w.name, w.status])).toEqual([['human', 'approve', 'open']]);
  // No worker runs: the job stays parked past the timeout, and the wait's row still says open.
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect((await admin.listJobWaits(id)).map((w) => [w.kind, w.name, w.status])).toEqual([['human', 'approve', 'timed_out']]);
  expect(await admin.completeHumanWait(id, 'approve', 'yes', { actor: 'ops:ada' })).toBe('timed_out');
});
