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
