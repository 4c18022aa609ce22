/**
 * Worker groups in Nest: `worker: [{ queues, concurrency }, ...]` runs one worker whose groups
 * keep their own slots (a flooded group never delays another's job), `@OnWorkhorseEvent` sees
 * each job's group, a handler's queue that no group claims is warned about, shutdown drains
 * every group; `metrics: { queueDepth: 'all' }` makes a process without a worker report every
 * queue; and the options are checked at start-up.
 */
import { Injectable, Logger } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { metrics } from '@opentelemetry/api';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import {
  JobHandler,
  OnWorkhorseEvent,
  Queue,
  WorkhorseConfigurationError,
  WorkhorseModule,
  WorkhorseWorker,
  type WorkerEventOf,
  type WorkhorseModuleOptions,
} from 'nestjs-workhorse';
import { stateOf } from '../support/job-state';
import { useTestDatabase } from '../support/test-database';
import { gate, waitFor } from '../support/wait';
import { quietNestLogs, startModule } from './support';

const floodGate = gate();

@Injectable()
class Handlers {
  @JobHandler('email.send', { queue: 'emails' })
  async send(): Promise<void> {
    await floodGate.promise;
  }

  @JobHandler('report.build', { queue: 'reports' })
  build(): string {
    return 'built';
  }

  @JobHandler('audit.write', { queue: 'audit' })
  audit(): void {}
}

@Injectable()
class Watchers {
  readonly succeeded: WorkerEventOf<'job.succeeded'>[] = [];

  @OnWorkhorseEvent('job.succeeded')
  record(event: WorkerEventOf<'job.succeeded'>): void {
    this.succeeded.push(event);
  }
}

let moduleRef: TestingModule | null = null;
const { db, pool, admin } = useTestDatabase({
  beforeDrop: async () => {
    await moduleRef?.close();
  },
});
const warnings: string[] = [];

beforeAll(() => {
  quietNestLogs();
  jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => void warnings.push(String(message)));
});

afterAll(() => {
  jest.restoreAllMocks();
});

/** Cancels every ready job: what a test left over is not the next test's work. */
async function cancelReady(): Promise<void> {
  for (const job of (await admin.listJobs({ states: ['ready'], limit: 1000 })).items) await admin.cancel(job.id);
}

async function statesOf(ids: string[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const id of ids) {
    const state = (await stateOf(pool, id)) ?? 'gone';
    counts[state] = (counts[state] ?? 0) + 1;
  }
  return counts;
}

it("a flooded group never delays another group's job; events name the group; shutdown drains every group", async () => {
  moduleRef = await startModule({
    imports: [
      WorkhorseModule.forRoot({
        connectionString: db.url,
        worker: [
          { queues: ['emails'], concurrency: 2 },
          { name: 'reporting', queues: ['reports'], concurrency: 1 },
        ],
      }),
    ],
    providers: [Handlers, Watchers],
  });
  const worker = moduleRef.get(WorkhorseWorker);
  const queue = moduleRef.get(Queue);
  const watchers = moduleRef.get(Watchers);
  expect(warnings.filter((w) => w.includes('No worker group of this process claims queue(s) audit'))).toHaveLength(1);

  const emails = await queue.enqueueMany(Array.from({ length: 20 }, () => ({ type: 'email.send', payload: {} })));
  await waitFor(async () => (await statesOf(emails)).active === 2, 10_000, 'the flood to fill its group');
  const report = await queue.enqueue('report.build', {});
  await waitFor(async () => (await stateOf(pool, report)) === 'succeeded', 10_000, "the reporting group's job to succeed");
  expect(await statesOf(emails)).toEqual({ active: 2, ready: 18 });
  expect(worker.groups).toEqual([
    { name: 'emails', queues: ['emails'], concurrency: 2, activeCount: 2 },
    { name: 'reporting', queues: ['reports'], concurrency: 1, activeCount: 0 },
  ]);
  await waitFor(() => watchers.succeeded.length === 1, 10_000, '@OnWorkhorseEvent to see the success');
  expect(watchers.succeeded[0]).toMatchObject({ jobId: report, group: 'reporting', queue: 'reports', type: 'report.build' });

  // A report held in its group while the module closes: the close drains both groups.
  const heldReport = await queue.enqueue('email.send', {}, { queue: 'reports' });
  await waitFor(() => worker.groups[1].activeCount === 1, 10_000, 'a job held in the reporting group');
  const closing = moduleRef.close();
  floodGate.open();
  await closing;
  moduleRef = null;
  expect(await stateOf(pool, heldReport)).toBe('succeeded');
  const after = await statesOf(emails);
  // The two running when the close began succeeded; the rest stayed ready (claims stopped at once).
  expect(after.succeeded).toBeGreaterThanOrEqual(2);
  expect(after.active ?? 0).toBe(0);
  expect((after.succeeded ?? 0) + (after.ready ?? 0)).toBe(20);
  await cancelReady();
});

it("runOnce runs one pass over every group's queues and the handlers' at the groups' concurrency added up", async () => {
  moduleRef = await startModule({
    imports: [
      WorkhorseModule.forRoot({
        connectionString: db.url,
        worker: [
          { queues: ['emails'], concurrency: 1 },
          { queues: ['reports'], concurrency: 2 },
        ],
      }),
    ],
    providers: [Handlers, Watchers],
  });
  const worker = moduleRef.get(WorkhorseWorker);
  worker.pause();
  const queue = moduleRef.get(Queue);
  const audit = await queue.enqueue('audit.write', {});
  const reports = await queue.enqueueMany(Array.from({ length: 4 }, () => ({ type: 'report.build', payload: {} })));
  // 3 slots in all (1 + 2), over the groups' queues and the handlers' (audit, which no group lists).
  expect(await worker.runOnce()).toBe(3);
  expect(await stateOf(pool, audit)).toBe('succeeded');
  expect(await statesOf(reports)).toEqual({ succeeded: 2, ready: 2 });
  await moduleRef.close();
  moduleRef = null;
  await cancelReady();
});

it("metrics: { queueDepth: 'all' } makes a process without a worker report every queue, one that no worker serves included", async () => {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(provider);
  try {
    moduleRef = await startModule({ imports: [WorkhorseModule.forRoot({ connectionString: db.url, metrics: { queueDepth: 'all' } })] });
    await moduleRef.get(Queue).enqueue('nobody.serves', {}, { queue: 'stuck' });
    await reader.forceFlush();
    const depth = exporter
      .getMetrics()
      .flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics))
      .find((m) => m.descriptor.name === 'workhorse.queue.depth');
    const ready = Object.fromEntries(
      (depth?.dataPoints ?? []).filter((p) => p.attributes.state === 'ready').map((p) => [String(p.attributes.queue), p.value as number]),
    );
    expect(ready).toMatchObject({ stuck: 1 });
    await moduleRef.close();
    moduleRef = null;
  } finally {
    metrics.disable();
    await provider.shutdown();
  }
});

describe('worker groups and metrics options are checked at start-up', () => {
  const cases: [string, unknown, string][] = [
    ['an empty list of groups', { worker: [] }, 'worker: must list 1 to 20 groups'],
    ['a queue in two groups', { worker: [{ queues: ['a'] }, { queues: ['b', 'a'] }] }, 'worker[1].queues: lists "a", which group "a" claims already'],
    ['a group without queues', { worker: [{ concurrency: 5 }] }, 'worker[0].queues: must list 1 to 100 queue names'],
    ['a bad group setting', { worker: [{ queues: ['a'], concurrency: 0 }] }, 'worker[0].concurrency: must be an integer from 1 to 1000'],
    ['metrics inside worker', { worker: { metrics: { queueDepth: 'all' } } }, 'metrics is an option of the module, not of the worker'],
    ['a bad queue depth scope', { metrics: { queueDepth: 'every' } }, "metrics.queueDepth: must be 'own', 'all' or false"],
    ['an unknown metrics option', { metrics: { depth: 'all' } }, 'metrics.depth: is not a metrics option'],
  ];

  it.each(cases)('refuses %s with a clear message, before connecting', async (_label, options, message) => {
    const attempt = Test.createTestingModule({
      imports: [WorkhorseModule.forRoot({ connectionString: 'postgres://x/y', ...(options as object) } as WorkhorseModuleOptions)],
    }).compile();
    await expect(attempt).rejects.toBeInstanceOf(WorkhorseConfigurationError);
    await expect(attempt).rejects.toThrow(message);
  });
});
