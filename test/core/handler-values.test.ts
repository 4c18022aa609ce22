/**
 * Issue 30, items 6 and 10, for the TypeScript API.
 *
 * - Every options object refuses a key it does not know with a WorkhorseValidationError naming
 *   the key, before anything is sent (a JavaScript caller gets past the types): the handler
 *   context's calls (`waitForSignal` parked with no timeout on `{ timeout }`), and a child's
 *   dependency options (not options of a child: a child waits for nothing).
 * - What the library hands a handler can be returned as the job's result (and checkpointed) as
 *   it is: a human decision (its `decidedAt` was a Date, which results refuse), a signal's
 *   payload, child outcomes, dependencies.
 */
import {
  Worker,
  WorkhorseValidationError,
  type ChildJobSpec,
  type HandlerContext,
  type WaitForHumanOptions,
  type WaitForSignalOptions,
} from '../../lib/core';
import { useWaitTestBed } from '../support/wait-test-bed';
import { waitFor } from '../support/wait';

const bed = useWaitTestBed({ concurrency: 5 });
const { pool, queue, admin, startWorker, waitForState } = bed;

// Bad input has to get past the type checker first, the way it does from JavaScript callers.
const as = <T>(value: unknown): T => value as T;

describe('handler context options refuse unknown keys (issue 30.6)', () => {
  it('waitForSignal, waitForHuman, runChild and runChildren name the key and write nothing', async () => {
    const q = 'keys-ctx';
    const refusals: Record<string, string> = {};
    const attempt = async (label: string, call: () => Promise<unknown>): Promise<void> => {
      try {
        await call();
        refusals[label] = 'accepted';
      } catch (error) {
        refusals[label] = error instanceof WorkhorseValidationError ? error.field : `${(error as Error).name}: ${(error as Error).message}`;
      }
    };
    const jobId = await queue.enqueue('keys.probe', null, { queue: q });
    startWorker(q, (w: Worker) =>
      w.handle('keys.probe', async (_payload: unknown, ctx: HandlerContext) => {
        await attempt('waitForSignal', () => ctx.waitForSignal('s', as<WaitForSignalOptions>({ timeout: 1000 })));
        await attempt('waitForHuman', () => ctx.waitForHuman('h', as<WaitForHumanOptions>({ timeout: 1000 })));
        await attempt('runChild dependsOn', () => ctx.runChild('c', 'keys.child', null, as<ChildJobSpec['options']>({ dependsOn: [ctx.jobId] })));
        await attempt('runChild policy', () => ctx.runChild('c', 'keys.child', null, as<ChildJobSpec['options']>({ onDependencyFailed: 'run' })));
        await attempt('runChild bogus', () => ctx.runChild('c', 'keys.child', null, as<ChildJobSpec['options']>({ bogus: 1 })));
        await attempt('runChildren spec', () => ctx.runChildren('c', [as<ChildJobSpec>({ type: 'keys.child', payload: null, queue: q })]));
        await attempt('runChildren dependsOn', () =>
          ctx.runChildren('c', [{ type: 'keys.child', payload: null }, { type: 'keys.child', payload: null, options: as<ChildJobSpec['options']>({ dependsOn: [ctx.jobId] }) }]),
        );
        return 'probed';
      }),
    );
    await waitForState(jobId, 'succeeded');
    expect(refusals).toEqual({
      waitForSignal: 'timeout',
      waitForHuman: 'timeout',
      'runChild dependsOn': 'children[0].dependsOn',
      'runChild policy': 'children[0].onDependencyFailed',
      'runChild bogus': 'children[0].bogus',
      'runChildren spec': 'children[0].queue',
      'runChildren dependsOn': 'children[1].dependsOn',
    });
    const { rows } = await pool.query<{ n: number }>(
      'SELECT (SELECT count(*) FROM workhorse.job_signal_wait WHERE job_id = $1) + (SELECT count(*) FROM workhorse.job_human_wait WHERE job_id = $1) + (SELECT count(*) FROM workhorse.job_child_call WHERE parent_id = $1) AS n',
      [jobId],
    );
    expect(Number(rows[0].n)).toBe(0);
  });
});

describe('what a handler is given can be returned and checkpointed as it is (issue 30.10)', () => {
  it('a human decision, a signal payload, child outcomes and dependencies', async () => {
    const q = 'values-ctx';
    const prerequisite = await queue.enqueue('values.first', null, { queue: q });
    const jobId = await queue.enqueue('values.all', null, { queue: q, dependsOn: [prerequisite] });
    startWorker(q, (w: Worker) =>
      w
        .handle('values.first', () => ({ first: true }))
        .handle('values.child', (n: number) => {
          if (n < 0) throw new Error('negative');
          return n * 2;
        })
        .handle('values.all', async (_payload: unknown, ctx: HandlerContext) => {
          const dependencies = await ctx.checkpoint('dependencies', () => ctx.dependencies());
          const children = await ctx.checkpoint('children', () =>
            ctx.runChildren('kids', [
              { type: 'values.child', payload: 1, options: { queue: q } },
              { type: 'values.child', payload: -1, options: { queue: q, maxAttempts: 1 } },
            ]),
          );
          const signal = await ctx.waitForSignal('go');
          const decision = await ctx.waitForHuman('approve', { choices: ['yes', 'no'] });
          const again = await ctx.checkpoint('decision', () => decision);
          return { dependencies, children, signal, decision, again };
        }),
    );
    expect(['delivered', 'buffered']).toContain(await queue.sendSignal(jobId, 'go', { at: 'now' }));
    await waitFor(async () => (await admin.listHumanWaits({ jobId })).items.length === 1, 15_000, 'the human wait');
    expect(await queue.completeHumanWait(jobId, 'approve', 'yes', { actor: 'alice' })).toBe('completed');
    await waitForState(jobId, 'succeeded');
    const job = await admin.getJob(jobId);
    const result = job?.result as Record<string, unknown>;
    expect(result.dependencies).toEqual([{ jobId: prerequisite, state: 'succeeded', result: { first: true }, error: null }]);
    expect(result.children).toMatchObject([
      { state: 'succeeded', result: 2, error: null },
      { state: 'failed', result: null, error: { message: 'negative' } },
    ]);
    expect(result.signal).toEqual({ at: 'now' });
    expect(result.decision).toEqual({ decision: 'yes', actor: 'alice', reason: null, decidedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) });
    expect(result.again).toEqual(result.decision);
  });
});

describe('every other options object of the TypeScript API refuses unknown keys (issue 30.6 audit)', () => {
  it('Queue, Admin and Worker: a WorkhorseValidationError naming the key', async () => {
    const jobId = await queue.enqueue('keys.any', null, { queue: 'keys-api' });
    const bogus = as<never>({ bogus: 1 });
    const since = new Date(Date.now() - 60_000);
    const calls: [string, () => unknown][] = [
      ['enqueue', () => queue.enqueue('keys.any', null, bogus)],
      ['enqueueMany', () => queue.enqueueMany([as<never>({ type: 'keys.any', payload: null, bogus: 1 })])],
      ['sendSignal', () => queue.sendSignal(jobId, 's', null, bogus)],
      ['completeHumanWait', () => queue.completeHumanWait(jobId, 'h', 'x', as<never>({ actor: 'a', bogus: 1 }))],
      ['syncSchedules', () => queue.syncSchedules('keys', [as<never>({ key: 'k', type: 't', cron: '* * * * *', bogus: 1 })])],
      ['getJobTimeline', () => admin.getJobTimeline(jobId, bogus)],
      ['listJobs', () => admin.listJobs(bogus)],
      ['queueActivity', () => admin.queueActivity(as<never>({ since, bucketSeconds: 60, bogus: 1 }))],
      ['cancel', () => admin.cancel(jobId, bogus)],
      ['listHumanWaits', () => admin.listHumanWaits(bogus)],
      ['listJobSignals', () => admin.listJobSignals(jobId, bogus)],
      ['listJobWaits', () => admin.listJobWaits(jobId, bogus)],
      ['admin.completeHumanWait', () => admin.completeHumanWait(jobId, 'h', 'x', as<never>({ actor: 'a', bogus: 1 }))],
      ['listDeadLetters', () => admin.listDeadLetters(bogus)],
      ['redrive', () => admin.redrive(jobId, as<never>({ requestId: 'r', bogus: 1 }))],
      ['redriveMany filter', () => admin.redriveMany(bogus, { requestId: 'r' })],
      ['redriveMany options', () => admin.redriveMany({}, as<never>({ requestId: 'r', bogus: 1 }))],
      ['pauseQueue', () => admin.pauseQueue('keys-api', bogus)],
      ['resumeQueue', () => admin.resumeQueue('keys-api', bogus)],
      ['setQueuePolicy', () => admin.setQueuePolicy('keys-api', bogus)],
      ['setQueuePolicy options', () => admin.setQueuePolicy('keys-api', null, bogus)],
      ['drainWorker', () => admin.drainWorker('w', bogus)],
      ['health', () => admin.health(bogus)],
      ['setRetention', () => admin.setRetention(bogus)],
      ['setRetention options', () => admin.setRetention({}, bogus)],
      ['runRetention', () => admin.runRetention(bogus)],
      ['listSchedules', () => admin.listSchedules(bogus)],
      ['getScheduleHistory', () => admin.getScheduleHistory('k', bogus)],
      ['pauseSchedule', () => admin.pauseSchedule('k', bogus)],
      ['resumeSchedule', () => admin.resumeSchedule('k', bogus)],
      ['triggerSchedule', () => admin.triggerSchedule('k', bogus)],
      ['new Worker', () => new Worker(queue, as<never>({ queues: ['keys-api'], bogus: 1 }))],
      ['worker.handle', () => new Worker(queue, { queues: ['keys-api'] }).handle('keys.any', () => null, bogus)],
    ];
    const outcomes: Record<string, string> = {};
    for (const [label, call] of calls) {
      try {
        await call();
        outcomes[label] = 'accepted';
      } catch (error) {
        outcomes[label] = error instanceof WorkhorseValidationError ? error.field : `${(error as Error).name}: ${(error as Error).message}`;
      }
    }
    const notRefused = Object.entries(outcomes).filter(([, field]) => !/bogus$/.test(field));
    expect(notRefused).toEqual([]);
  });
});
