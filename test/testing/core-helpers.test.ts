/**
 * `nestjs-workhorse/testing` without Nest: drainWorkhorse, waitForJobState and listEnqueued
 * given the core objects (a pool, a Queue, a core Worker), with an idle worker (passes of
 * runOnce) and a running one.
 */
import { Queue, Worker, WorkhorseValidationError, type HandlerContext } from 'nestjs-workhorse';
import { JobStateError, drainWorkhorse, listEnqueued, waitForJobState } from 'nestjs-workhorse/testing';
import { useTestDatabase } from '../support/test-database';

const running: Worker[] = [];
const { pool } = useTestDatabase({
  scope: 'test',
  afterEachTest: async () => {
    for (const worker of running.splice(0)) await worker.stop();
  },
});

/** A worker whose `fan-out` jobs enqueue a `greet` job per name, and whose `broken` jobs fail. */
function newWorker(queue: Queue): Worker {
  return new Worker(queue, { pollMs: 50, tickMs: 50 })
    .handle('greet', (payload: { name: string }) => `hello ${payload.name}`)
    .handle('fan-out', async (payload: { names: string[] }, ctx: HandlerContext) => {
      for (const name of payload.names) await queue.enqueue('greet', { name }, undefined, ctx.client);
      return payload.names.length;
    })
    .handle('broken', () => {
      throw new Error('always broken');
    });
}

it('drains with an idle core worker, follow-up jobs included, and lists and waits on a pool', async () => {
  const queue = new Queue(pool);
  const worker = newWorker(queue);
  const since = new Date();
  const fanOut = await queue.enqueue('fan-out', { names: ['ada', 'bob'] });

  const [listed] = await listEnqueued({ pool }, { since });
  expect(listed).toMatchObject({ id: fanOut, type: 'fan-out', state: 'ready', payload: { names: ['ada', 'bob'] } });

  await drainWorkhorse({ queue, worker });
  expect(worker.isRunning).toBe(false);
  const jobs = await listEnqueued({ queue }, { since });
  expect(jobs.map((job) => [job.type, job.state, job.result])).toEqual([
    ['fan-out', 'succeeded', 2],
    ['greet', 'succeeded', 'hello ada'],
    ['greet', 'succeeded', 'hello bob'],
  ]);
  expect((await waitForJobState({ pool }, fanOut, 'succeeded')).result).toBe(2);
  expect(await listEnqueued({ pool }, { type: 'greet', since: new Date() })).toEqual([]);
});

it('drains with a running core worker, and waitForJobState says how a job ended otherwise', async () => {
  const queue = new Queue(pool);
  const worker = newWorker(queue);
  running.push(worker);
  void worker.run();
  const broken = await queue.enqueue('broken', {}, { maxAttempts: 1 });
  const fanOut = await queue.enqueue('fan-out', { names: ['cy'] });

  await drainWorkhorse({ queue, worker }, { timeoutMs: 20_000 });
  expect(await listEnqueued({ queue }, { type: 'greet' })).toEqual([expect.objectContaining({ state: 'succeeded', result: 'hello cy' })]);
  expect((await waitForJobState({ queue }, fanOut, ['succeeded'])).result).toBe(1);
  await expect(waitForJobState({ pool }, broken, 'succeeded')).rejects.toThrow(JobStateError);
  await expect(waitForJobState({ pool }, broken, 'succeeded')).rejects.toThrow(/ended failed and will never reach succeeded/);
});

it('says what it needs when the core objects lack it', async () => {
  await expect(drainWorkhorse({ pool })).rejects.toThrow(WorkhorseValidationError);
  await expect(drainWorkhorse({ pool })).rejects.toMatchObject({ field: 'worker' });
  await expect(listEnqueued({})).rejects.toMatchObject({ field: 'target' });
});
