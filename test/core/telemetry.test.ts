/**
 * OpenTelemetry metrics: with an SDK registered, a worker and a queue count jobs enqueued,
 * claimed, succeeded, failed and retried, record run and wait times by queue and type, and
 * observe queue depth; without one, no instrument is even created.
 */
import { metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type HistogramMetricData,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { Admin, NonRetryableError, Queue, Worker } from '../../lib/core';
import { activeMeter, enqueuedAt, JobMetrics } from '../../lib/core/telemetry/job-metrics';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { pool } = useTestDatabase({ checkInvariants: false });

/** The points of one metric, as `queue/type[/state]` -> value (a histogram's: its count). */
function points(all: MetricData[], name: string): Record<string, number> {
  const metric = all.find((m) => m.descriptor.name === name);
  const out: Record<string, number> = {};
  for (const point of metric?.dataPoints ?? []) {
    const a = point.attributes as Record<string, string>;
    const key = [a.queue, a.type ?? a.state].join('/');
    out[key] = typeof point.value === 'number' ? point.value : (point as HistogramMetricData['dataPoints'][number]).value.count;
  }
  return out;
}

it('without an OpenTelemetry SDK, nothing is instrumented', () => {
  expect(activeMeter()).toBeNull();
  expect(JobMetrics.active()).toBeNull();
});

it('with an SDK: counters and histograms by queue and type, and queue depth as a gauge', async () => {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(provider);
  try {
    const queue = new Queue(pool);
    const admin = new Admin(pool);
    const ids = await queue.enqueueMany([
      { type: 'ok', payload: {}, queue: 'otel' },
      { type: 'ok', payload: {}, queue: 'otel' },
      { type: 'flaky', payload: {}, queue: 'otel', maxAttempts: 2, retryPolicy: { kind: 'fixed', delayMs: 0 } },
      { type: 'doomed', payload: {}, queue: 'otel' },
    ]);
    await queue.enqueue('later', {}, { queue: 'otel', runAt: new Date(Date.now() + 3_600_000) });
    const worker = new Worker(queue, { queues: ['otel'], pollMs: 20, tickMs: 50 })
      .handle('ok', () => 'done')
      .handle('flaky', (_p, ctx) => {
        if (ctx.attempt === 1) throw new Error('first time');
        return 'second time';
      })
      .handle('doomed', () => {
        throw new NonRetryableError('never');
      });
    const done = worker.run();
    await waitFor(async () => {
      const states = await Promise.all(ids.map(async (id) => (await admin.getJob(id))?.state));
      return states.every((s) => s === 'succeeded' || s === 'failed');
    }, 20_000, 'every due job to end');
    await reader.forceFlush();
    const exported = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
    expect(points(exported, 'workhorse.jobs.enqueued')).toEqual({ 'otel/ok': 2, 'otel/flaky': 1, 'otel/doomed': 1, 'otel/later': 1 });
    expect(points(exported, 'workhorse.jobs.claimed')).toEqual({ 'otel/ok': 2, 'otel/flaky': 2, 'otel/doomed': 1 });
    expect(points(exported, 'workhorse.jobs.succeeded')).toEqual({ 'otel/ok': 2, 'otel/flaky': 1 });
    expect(points(exported, 'workhorse.jobs.failed')).toEqual({ 'otel/doomed': 1 });
    expect(points(exported, 'workhorse.jobs.retried')).toEqual({ 'otel/flaky': 1 });
    expect(points(exported, 'workhorse.job.run_time')).toEqual({ 'otel/ok': 2, 'otel/flaky': 2, 'otel/doomed': 1 });
    // Measured once per job, at the claim of its first attempt.
    expect(points(exported, 'workhorse.job.wait_time')).toEqual({ 'otel/ok': 2, 'otel/flaky': 1, 'otel/doomed': 1 });
    expect(points(exported, 'workhorse.queue.depth')).toEqual({ 'otel/ready': 0, 'otel/scheduled': 1, 'otel/active': 0, 'otel/blocked': 0 });
    await worker.stop();
    await done;
  } finally {
    metrics.disable();
    await provider.shutdown();
  }
});

it('reads the enqueue time out of a job id (UUID version 7)', async () => {
  const before = Date.now();
  const id = await new Queue(pool).enqueue('t', {}, { queue: 'ids' });
  expect(enqueuedAt(id)).toBeGreaterThanOrEqual(before - 1000);
  expect(enqueuedAt(id)).toBeLessThanOrEqual(Date.now() + 1000);
  await new Admin(pool).cancel(id);
});
