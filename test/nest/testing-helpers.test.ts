/**
 * `nestjs-workhorse/testing`: drainWorkhorse (with and without a worker in the application,
 * with follow-up jobs, retries and a timeout), waitForJobState (success, timeout with the
 * actual state, another terminal state, no such job) and listEnqueued (filters and `since`).
 */
import { Injectable } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { JobHandler, Queue, WorkhorseModule, type HandlerContext } from 'nestjs-workhorse';
import { DrainTimeoutError, JobStateError, drainWorkhorse, listEnqueued, waitForJobState } from 'nestjs-workhorse/testing';
import { stateOf } from '../support/job-state';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

@Injectable()
class Handlers {
  constructor(private readonly queue: Queue) {}

  @JobHandler('greet')
  greet(payload: { name: string }): string {
    return `hello ${payload.name}`;
  }

  @JobHandler('fan-out', { queue: 'fan' })
  async fanOut(payload: { names: string[] }): Promise<number> {
    for (const name of payload.names) await this.queue.enqueue('greet', { name });
    return payload.names.length;
  }

  @JobHandler('flaky')
  flaky(_payload: unknown, ctx: HandlerContext): number {
    if (ctx.attempt < 3) throw new Error(`attempt ${ctx.attempt} fails`);
    return ctx.attempt;
  }

  @JobHandler('broken')
  broken(): never {
    throw new Error('always broken');
  }

  @JobHandler('stuck')
  async stuck(_payload: unknown, ctx: HandlerContext): Promise<void> {
    // Runs until aborted, like a handler waiting on something that never comes.
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
  }
}

const fast = { maxAttempts: 5, retryPolicy: { kind: 'fixed' as const, delayMs: 0 } };

const { db } = useTestDatabase();

beforeAll(async () => {
  quietNestLogs();
});

describe('in an application with a worker', () => {
  it('drainWorkhorse waits for the running worker to finish the due work', async () => {
    const app = await startModule({
      imports: [WorkhorseModule.forRoot({ connectionString: db.url, worker: { pollMs: 50, tickMs: 50 } })],
      providers: [Handlers],
    });
    try {
      const queue = app.get(Queue);
      const fanOut = await queue.enqueue('fan-out', { names: ['dee', 'eve'] });
      const flaky = await queue.enqueue('flaky', {}, fast);
      await drainWorkhorse(app);
      expect(await stateOf(db.pool, fanOut)).toBe('succeeded');
      expect(await stateOf(db.pool, flaky)).toBe('succeeded');
      const greetings = await listEnqueued(app, { type: 'greet' });
      expect(greetings.filter((job) => ['hello dee', 'hello eve'].includes(job.result as string))).toHaveLength(2);
    } finally {
      await app.close();
    }
  });
});

describe('in an application without a worker', () => {
  let app: TestingModule;

  beforeAll(async () => {
    app = await startModule({ imports: [WorkhorseModule.forRoot({ connectionString: db.url })], providers: [Handlers] });
  });

  afterAll(async () => {
    await app?.close();
  });

  it('drainWorkhorse runs due jobs with the discovered handlers, including jobs they enqueue and retries', async () => {
    const queue = app.get(Queue);
    const since = new Date();
    const fanOut = await queue.enqueue('fan-out', { names: ['ann', 'bea', 'cy'] });
    const flaky = await queue.enqueue('flaky', {}, fast);
    const later = await queue.enqueue('greet', { name: 'later' }, { runAt: new Date(Date.now() + 3_600_000) });

    await drainWorkhorse(app);

    expect(await waitForJobState(app, fanOut, 'succeeded', { timeoutMs: 0 })).toMatchObject({ queue: 'fan', result: 3 });
    expect(await waitForJobState(app, flaky, 'succeeded', { timeoutMs: 0 })).toMatchObject({ result: 3, currentAttempt: 3 });
    const greetings = await listEnqueued(app, { type: 'greet', since });
    expect(greetings.filter((job) => job.id !== later).map((job) => [job.state, job.result])).toEqual([
      ['succeeded', 'hello ann'],
      ['succeeded', 'hello bea'],
      ['succeeded', 'hello cy'],
    ]);
    expect(await stateOf(db.pool, later)).toBe('scheduled'); // not due: left alone
  });

  it('waitForJobState explains a timeout with the job as it is', async () => {
    const scheduled = await app.get(Queue).enqueue('greet', { name: 'x' }, { runAt: new Date(Date.now() + 3_600_000), maxAttempts: 4 });
    const attempt = waitForJobState(app, scheduled, ['succeeded', 'failed'], { timeoutMs: 100 });
    await expect(attempt).rejects.toBeInstanceOf(JobStateError);
    await expect(attempt).rejects.toThrow(
      new RegExp(`job ${scheduled} \\(greet\\) did not reach succeeded or failed within 100 ms; it is scheduled \\(attempt 0 of 4, run at .+, last error: none\\)`),
    );
  });

  it('waitForJobState fails at once when the job ended in another state, and reports a missing job', async () => {
    const broken = await app.get(Queue).enqueue('broken', {}, { maxAttempts: 1 });
    await drainWorkhorse(app);
    const startedAt = Date.now();
    await expect(waitForJobState(app, broken, 'succeeded')).rejects.toThrow(
      `job ${broken} (broken) ended failed and will never reach succeeded (attempt 1 of 1, error: Error: always broken)`,
    );
    expect(Date.now() - startedAt).toBeLessThan(5000);
    const missing = '00000000-0000-7000-8000-000000000000';
    await expect(waitForJobState(app, missing, 'succeeded', { timeoutMs: 50 })).rejects.toThrow(`no job ${missing} exists`);
  });

  it('listEnqueued lists jobs oldest first, by type, by queue and since a moment', async () => {
    const queue = app.get(Queue);
    const since = new Date();
    const a = await queue.enqueue('list.a', { n: 1 });
    const b = await queue.enqueue('list.b', { n: 2 }, { queue: 'other' });
    const c = await queue.enqueue('list.a', { n: 3 });
    expect((await listEnqueued(app, { since })).map((job) => job.id)).toEqual([a, b, c]);
    expect((await listEnqueued(app, { type: 'list.a' })).map((job) => job.payload)).toEqual([{ n: 1 }, { n: 3 }]);
    expect((await listEnqueued(app, { queue: 'other' })).map((job) => job.id)).toEqual([b]);
    expect(await listEnqueued(app, { type: 'list.a', since: new Date(Date.now() + 60_000) })).toEqual([]);
    expect((await listEnqueued(app)).length).toBeGreaterThan(3);
  });

  it('drainWorkhorse gives up after its timeout, naming the job still running', async () => {
    const stuck = await app.get(Queue).enqueue('stuck', {});
    const attempt = drainWorkhorse(app, { timeoutMs: 300 });
    await expect(attempt).rejects.toBeInstanceOf(DrainTimeoutError);
    await expect(attempt).rejects.toThrow(`drainWorkhorse: work was still due after 300 ms: ${stuck} (stuck on default, active, attempt 1)`);
    // The pass was stopped: the handler was aborted, and the job (still active) is left to lease
    // recovery. That is why this test comes last.
    expect(await stateOf(db.pool, stuck)).toBe('active');
  });
});
