import { createNoopMeter, metrics, ValueType, type Attributes, type Counter, type Histogram, type Meter } from '@opentelemetry/api';
import { reportedVersion } from '../package-version';

/** The instrumentation scope of every instrument (`otel_scope_name` in Prometheus). */
export const METER_NAME = 'nestjs-workhorse';

const NOOP_METER = createNoopMeter().constructor;

/**
 * The meter of the application's OpenTelemetry SDK, or null when none is registered: callers then
 * skip their instruments entirely (`metrics?.claimed(...)`), so without an SDK a job costs one
 * null check, not a call into the API's no-op instruments with an attribute object.
 */
export function activeMeter(): Meter | null {
  const meter = metrics.getMeter(METER_NAME, reportedVersion());
  return meter instanceof NOOP_METER ? null : meter;
}

/**
 * The job counters and histograms (docs/operations.md#metrics), by `queue` and `type`. Attribute
 * objects are built once per (queue, type) and kept, so counting a job allocates nothing.
 */
export class JobMetrics {
  private readonly enqueuedCounter: Counter;
  private readonly claimedCounter: Counter;
  private readonly succeededCounter: Counter;
  private readonly failedCounter: Counter;
  private readonly retriedCounter: Counter;
  private readonly runTime: Histogram;
  private readonly waitTime: Histogram;
  private readonly attributes = new Map<string, Map<string, Attributes>>();

  constructor(meter: Meter) {
    const count = (name: string, description: string) => meter.createCounter(name, { description, unit: '{job}', valueType: ValueType.INT });
    const ms = (name: string, description: string) => meter.createHistogram(name, { description, unit: 'ms' });
    this.enqueuedCounter = count('workhorse.jobs.enqueued', 'Jobs enqueued (counted when the enqueue statement returns).');
    this.claimedCounter = count('workhorse.jobs.claimed', 'Jobs claimed by a worker (each attempt).');
    this.succeededCounter = count('workhorse.jobs.succeeded', 'Jobs that succeeded.');
    this.failedCounter = count('workhorse.jobs.failed', 'Jobs that failed for good (dead letters).');
    this.retriedCounter = count('workhorse.jobs.retried', 'Failed attempts after which another attempt was scheduled.');
    this.runTime = ms('workhorse.job.run_time', "How long a handler ran, from its claim to its job's outcome.");
    this.waitTime = ms('workhorse.job.wait_time', 'From enqueue to the claim of the first attempt (includes a runAt delay).');
  }

  /** The meter's job metrics, or null without an OpenTelemetry SDK. */
  static active(): JobMetrics | null {
    const meter = activeMeter();
    return meter ? new JobMetrics(meter) : null;
  }

  enqueued(queue: string, type: string, count = 1): void {
    this.enqueuedCounter.add(count, this.of(queue, type));
  }

  /** A job was claimed; `jobId` (UUID version 7) tells when it was enqueued. */
  claimed(queue: string, type: string, jobId: string, attempt: number, claimedAt: number): void {
    const attributes = this.of(queue, type);
    this.claimedCounter.add(1, attributes);
    if (attempt === 1) this.waitTime.record(Math.max(0, claimedAt - enqueuedAt(jobId)), attributes);
  }

  succeeded(queue: string, type: string, runMs: number): void {
    const attributes = this.of(queue, type);
    this.succeededCounter.add(1, attributes);
    this.runTime.record(runMs, attributes);
  }

  failed(queue: string, type: string, runMs: number): void {
    const attributes = this.of(queue, type);
    this.failedCounter.add(1, attributes);
    this.runTime.record(runMs, attributes);
  }

  retried(queue: string, type: string, runMs: number): void {
    const attributes = this.of(queue, type);
    this.retriedCounter.add(1, attributes);
    this.runTime.record(runMs, attributes);
  }

  private of(queue: string, type: string): Attributes {
    let byType = this.attributes.get(queue);
    if (!byType) this.attributes.set(queue, (byType = new Map()));
    let attributes = byType.get(type);
    if (!attributes) byType.set(type, (attributes = { queue, type }));
    return attributes;
  }
}

/** When a job was enqueued: the first 48 bits of its id (UUID version 7) are Unix milliseconds. */
export function enqueuedAt(jobId: string): number {
  return Number.parseInt(jobId.slice(0, 8), 16) * 65_536 + Number.parseInt(jobId.slice(9, 13), 16);
}
