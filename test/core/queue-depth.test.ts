/**
 * The scope of the `workhorse.queue.depth` gauge (`metrics.queueDepth`): 'own' reports the
 * worker's queues, 'all' those and every queue of the database (a queue no worker serves shows
 * up, and one that emptied reports 0), false none.
 */
import { metrics } from '@opentelemetry/api';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { Worker, type QueueDepthScope } from '../../lib/core';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

// Each test reads every queue of its database.
const { queue, admin } = useTestDatabase({ scope: 'test' });

/** Runs a worker of queue `served` with the gauge's `scope` and returns the depth points of each collection, as `queue/state` -> jobs. */
async function collect(scope: QueueDepthScope, between: () => Promise<void> = async () => undefined): Promise<Record<string, number>[]> {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(provider);
  const worker = new Worker(queue, { queues: ['served'], metrics: { queueDepth: scope }, listen: false });
  let started = false;
  worker.on(['worker.started'], () => {
    started = true;
  });
  const done = worker.run();
  const collections: Record<string, number>[] = [];
  const read = async () => {
    exporter.reset();
    await reader.forceFlush();
    const depth = exporter
      .getMetrics()
      .flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics))
      .find((m) => m.descriptor.name === 'workhorse.queue.depth');
    const out: Record<string, number> = {};
    for (const point of depth?.dataPoints ?? []) {
      const { queue: q, state } = point.attributes as Record<string, string>;
      out[`${q}/${state}`] = point.value as number;
    }
    collections.push(out);
  };
  try {
    await waitFor(() => started, 10_000, 'the worker to start');
    await read();
    await between();
    await read();
  } finally {
    await worker.stop();
    await done;
    metrics.disable();
    await provider.shutdown();
  }
  return collections;
}

const zero = (q: string) => ({ [`${q}/ready`]: 0, [`${q}/scheduled`]: 0, [`${q}/active`]: 0, [`${q}/blocked`]: 0 });

it("'all' reports every queue, the stuck one that no worker serves included, and 0 for a queue that emptied", async () => {
  await queue.enqueueMany([
    { type: 'stuck.job', payload: {}, queue: 'stuck' },
    { type: 'stuck.job', payload: {}, queue: 'stuck' },
  ]);
  const gone = await queue.enqueue('gone.job', {}, { queue: 'emptied' });
  const [first, second] = await collect('all', async () => {
    await admin.cancel(gone);
  });
  // The worker's own queue, empty and never listed, is reported too.
  expect(first).toEqual({ ...zero('served'), ...zero('stuck'), 'stuck/ready': 2, ...zero('emptied'), 'emptied/ready': 1 });
  expect(second).toEqual({ ...zero('served'), ...zero('stuck'), 'stuck/ready': 2, ...zero('emptied') });
});

it("'own' (the default) reports the worker's queues only; false reports nothing", async () => {
  await queue.enqueue('stuck.job', {}, { queue: 'stuck' });
  const [own] = await collect('own');
  expect(own).toEqual(zero('served'));
  const [none] = await collect(false);
  expect(none).toEqual({});
});
