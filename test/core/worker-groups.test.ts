/**
 * Worker groups (`groups`): each group claims from its own queues for its own slots, so a flood
 * in one group never takes the slots of another; events name the group; one registry row; a
 * stop drains every group; runOnce claims per group; and the options are checked.
 */
import { Worker, WorkhorseValidationError, type WorkerEvent, type WorkerOptions } from '../../lib/core';
import { checkWorkerOptions } from '../../lib/core/worker';
import { stateOf } from '../support/job-state';
import { useTestDatabase } from '../support/test-database';
import { gate, waitFor } from '../support/wait';

const running: { worker: Worker; done: Promise<void> }[] = [];

const { pool, queue, admin } = useTestDatabase({
  afterEachTest: async () => {
    for (const { worker, done } of running.splice(0)) {
      await worker.stop();
      await done;
    }
  },
});

function start(worker: Worker): WorkerEvent[] {
  const events: WorkerEvent[] = [];
  worker.on((event) => events.push(event));
  running.push({ worker, done: worker.run() });
  return events;
}

async function statesOf(ids: string[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const id of ids) {
    const state = (await stateOf(pool, id)) ?? 'gone';
    counts[state] = (counts[state] ?? 0) + 1;
  }
  return counts;
}

it("a flood in one group never takes another group's slots: its job runs while the flood's jobs are all active or ready", async () => {
  const release = gate();
  // A long poll: the urgent job is claimed because its notification wakes its own group.
  const worker = new Worker(queue, {
    groups: [
      { name: 'bulk', queues: ['g-flood'], concurrency: 2 },
      { queues: ['g-urgent'], concurrency: 1 },
    ],
    pollMs: 60_000,
  })
    .handle('flood.slow', async () => {
      await release.promise;
    })
    .handle('urgent.fast', async () => 'done');
  const events = start(worker);
  const floodIds = await queue.enqueueMany(Array.from({ length: 30 }, () => ({ type: 'flood.slow', payload: {}, queue: 'g-flood' })));
  await waitFor(async () => (await statesOf(floodIds)).active === 2 && worker.activeCount === 2, 10_000, 'the flood to fill its group');
  await waitFor(
    async () => (await pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN workhorse_jobs'")).rowCount,
    10_000,
    'the worker to listen',
  );

  const urgent = await queue.enqueue('urgent.fast', {}, { queue: 'g-urgent' });
  await waitFor(async () => (await stateOf(pool, urgent)) === 'succeeded', 10_000, "the urgent group's job to succeed");

  // The flood still holds exactly its group's slots and nothing of it has finished.
  expect(await statesOf(floodIds)).toEqual({ active: 2, ready: 28 });
  expect(worker.groups).toEqual([
    { name: 'bulk', queues: ['g-flood'], concurrency: 2, activeCount: 2 },
    { name: 'g-urgent', queues: ['g-urgent'], concurrency: 1, activeCount: 0 },
  ]);
  const claimed = events.filter((e): e is Extract<WorkerEvent, { name: 'job.claimed' }> => e.name === 'job.claimed');
  expect(claimed.find((e) => e.jobId === urgent)?.group).toBe('g-urgent');
  expect(claimed.filter((e) => e.group === 'bulk').map((e) => e.queue)).toEqual(['g-flood', 'g-flood']);
  const succeeded = events.find((e) => e.name === 'job.succeeded' && e.jobId === urgent);
  expect(succeeded).toMatchObject({ group: 'g-urgent', queue: 'g-urgent', type: 'urgent.fast' });
  release.open();
  await waitFor(async () => (await statesOf(floodIds)).succeeded === 30, 30_000, 'the flood to drain');
});

it('worker.started describes every group, and the registry lists the worker once with all its queues and slots', async () => {
  const worker = new Worker(queue, {
    groups: [
      { name: 'mail', queues: ['g-emails', 'g-sms'], concurrency: 5 },
      { queues: ['g-reports'], concurrency: 2, roundTrips: 2 },
    ],
  });
  const events = start(worker);
  const startedEvent = await waitFor(() => events.find((e) => e.name === 'worker.started'), 10_000, 'worker.started');
  expect(startedEvent).toEqual({
    name: 'worker.started',
    workerId: worker.workerId,
    queues: ['g-emails', 'g-sms', 'g-reports'],
    concurrency: 7,
    groups: [
      { name: 'mail', queues: ['g-emails', 'g-sms'], concurrency: 5 },
      { name: 'g-reports', queues: ['g-reports'], concurrency: 2 },
    ],
  });
  const row = await waitFor(async () => (await admin.listWorkers()).find((w) => w.workerId === worker.workerId), 10_000, 'the registry row');
  expect(row).toMatchObject({ status: 'running', queues: ['g-emails', 'g-sms', 'g-reports'], concurrency: 7 });
});

it('a worker without groups is one group named after its queues', async () => {
  const worker = new Worker(queue, { queues: ['g-orders', 'g-invoices'], concurrency: 3 }).handle('order.ship', async () => undefined);
  const events = start(worker);
  const job = await queue.enqueue('order.ship', {}, { queue: 'g-invoices' });
  await waitFor(async () => (await stateOf(pool, job)) === 'succeeded', 10_000, 'the job to succeed');
  expect(worker.groups).toEqual([{ name: 'g-orders,g-invoices', queues: ['g-orders', 'g-invoices'], concurrency: 3, activeCount: 0 }]);
  expect(events.find((e) => e.name === 'job.claimed')).toMatchObject({ jobId: job, group: 'g-orders,g-invoices' });
});

it('stop() drains every group: the running jobs of both are recorded as succeeded', async () => {
  const release = gate();
  const worker = new Worker(queue, {
    groups: [
      { queues: ['g-drain-a'], concurrency: 1 },
      { queues: ['g-drain-b'], concurrency: 1 },
    ],
    shutdownTimeoutMs: 20_000,
  }).handle('drain.hold', async () => {
    await release.promise;
    return 'finished';
  });
  const done = worker.run();
  const [a, b] = await queue.enqueueMany([
    { type: 'drain.hold', payload: {}, queue: 'g-drain-a' },
    { type: 'drain.hold', payload: {}, queue: 'g-drain-b' },
  ]);
  await waitFor(() => worker.groups.every((group) => group.activeCount === 1), 10_000, 'a job running in each group');
  const stopped = worker.stop();
  release.open();
  await stopped;
  await done;
  expect(await statesOf([a, b])).toEqual({ succeeded: 2 });
  expect(worker.isRunning).toBe(false);
});

it("runOnce claims up to each group's concurrency from the group's queues", async () => {
  const jobs = await queue.enqueueMany([
    ...Array.from({ length: 5 }, () => ({ type: 'once.job', payload: {}, queue: 'g-once-a' })),
    ...Array.from({ length: 5 }, () => ({ type: 'once.job', payload: {}, queue: 'g-once-b' })),
  ]);
  const worker = new Worker(queue, {
    groups: [
      { queues: ['g-once-a'], concurrency: 3 },
      { queues: ['g-once-b'], concurrency: 1 },
    ],
  }).handle('once.job', async () => undefined);
  expect(await worker.runOnce()).toBe(4);
  expect(await statesOf(jobs.slice(0, 5))).toEqual({ succeeded: 3, ready: 2 });
  expect(await statesOf(jobs.slice(5))).toEqual({ succeeded: 1, ready: 4 });
});

describe('group options are checked before anything starts', () => {
  const refused: [string, WorkerOptions, string, RegExp][] = [
    ['an empty list', { groups: [] }, 'groups', /1 to 20 groups/],
    ['a group without queues', { groups: [{ queues: [] }] }, 'groups[0].queues', /1 to 100 queue names/],
    ['a queue in two groups', { groups: [{ queues: ['a', 'b'] }, { queues: ['b'] }] }, 'groups[1].queues', /"b", which group "a,b" claims already/],
    ['two groups of one name', { groups: [{ name: 'x', queues: ['a'] }, { name: 'x', queues: ['b'] }] }, 'groups[1].name', /names another group/],
    ['a bad name', { groups: [{ name: 'a b', queues: ['a'] }] }, 'groups[0].name', /1 to 128 characters/],
    ['queues beside groups', { queues: ['a'], groups: [{ queues: ['b'] }] }, 'queues', /cannot be given with groups/],
    ['concurrency beside groups', { concurrency: 5, groups: [{ queues: ['b'] }] }, 'concurrency', /cannot be given with groups/],
    ['a group concurrency out of range', { groups: [{ queues: ['a'], concurrency: 0 }] }, 'groups[0].concurrency', /1 to 1000/],
    ['more round trips than slots', { groups: [{ queues: ['a'], concurrency: 1, roundTrips: 2 }] }, 'groups[0].roundTrips', /at most concurrency/],
    ['an unknown group option', { groups: [{ queues: ['a'], leaseMs: 5 } as never] }, 'groups[0].leaseMs', /not a worker group option/],
    ['a group that is not an object', { groups: ['emails' as never] }, 'groups[0]', /must be an object/],
    ['a bad queue depth scope', { metrics: { queueDepth: 'some' as never } }, 'metrics.queueDepth', /'own', 'all' or false/],
  ];
  it.each(refused)('%s', (_, options, field, message) => {
    let error: unknown;
    try {
      new Worker(queue, options);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    expect(error).toMatchObject({ field });
    expect((error as Error).message).toMatch(message);
  });

  it('fills in defaults per group', () => {
    const settings = checkWorkerOptions({ groups: [{ queues: ['a'] }, { name: 'b', queues: ['b', 'c'], concurrency: 4, roundTrips: 2 }] });
    expect(settings.groups).toEqual([
      { name: 'a', queues: ['a'], concurrency: 10, roundTrips: 1 },
      { name: 'b', queues: ['b', 'c'], concurrency: 4, roundTrips: 2 },
    ]);
    expect(settings).toMatchObject({ queues: ['a', 'b', 'c'], concurrency: 14, queueDepth: 'own' });
  });
});
