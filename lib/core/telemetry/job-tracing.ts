import {
  context,
  isSpanContextValid,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { ClaimedJob } from '../claimed-job';
import { reportedVersion } from '../package-version';
import { injectTraceContext, spanContextOf, type TraceContext } from './trace-context';

/** The instrumentation scope of every span. */
export const TRACER_NAME = 'nestjs-workhorse';

/** `messaging.system` of every span (OpenTelemetry's messaging semantic conventions). */
export const MESSAGING_SYSTEM = 'workhorse';

/**
 * The tracer of the application's OpenTelemetry SDK, or null when none is registered: callers
 * then skip tracing entirely, so without an SDK a job costs a null check, not a no-op span.
 */
export function activeTracer(): Tracer | null {
  const provider = trace.getTracerProvider();
  // The API's own provider forwards to the SDK's once one registers; until then it has none.
  if (provider instanceof ProxyTracerProvider) return provider.getDelegateTracer(TRACER_NAME, reportedVersion()) ?? null;
  return provider.getTracer(TRACER_NAME, reportedVersion());
}

/** One job an enqueue statement sends, as its span describes it. */
export interface SentJob {
  type: string;
  queue?: string;
}

/**
 * The PRODUCER span of one enqueue statement (one job or a batch) and the trace context the
 * statement stores with its jobs: the span's own, so a job's handler span links to it.
 */
export class EnqueueSpan {
  constructor(
    private readonly span: Span,
    /** JSON text of the span's trace context, or null when the propagator gave none. */
    private readonly traceContextJson: string | null,
  ) {}

  /** `request` (the JSON object text of one enqueue request) with the trace context added. */
  carry(request: string): string {
    return this.traceContextJson === null ? request : `${request.slice(0, -1)},"traceContext":${this.traceContextJson}}`;
  }

  /** The statement returned these job ids. */
  sent(ids: readonly string[]): void {
    if (ids.length === 1) this.span.setAttribute('messaging.message.id', ids[0]);
    this.span.end();
  }

  /** The statement failed: nothing was enqueued. */
  failed(error: unknown): void {
    recordError(this.span, error);
    this.span.end();
  }
}

/** Starts the spans of enqueues and of attempts (docs/operations.md#tracing). */
export class JobTracing {
  constructor(private readonly tracer: Tracer) {}

  /** The SDK's tracing, or null without an OpenTelemetry SDK. */
  static active(): JobTracing | null {
    const tracer = activeTracer();
    return tracer ? new JobTracing(tracer) : null;
  }

  /**
   * A PRODUCER span `send <queue>`, child of the caller's active span, for an enqueue of `jobs`;
   * null when the caller has no active span (nothing is traced or stored then).
   */
  startEnqueue(jobs: readonly SentJob[]): EnqueueSpan | null {
    const parent = context.active();
    const parentSpan = trace.getSpanContext(parent);
    if (parentSpan === undefined || !isSpanContextValid(parentSpan)) return null;
    const queue = common(jobs, (job) => job.queue ?? 'default');
    const type = common(jobs, (job) => job.type);
    const attributes: Attributes = {
      'messaging.system': MESSAGING_SYSTEM,
      'messaging.operation.name': 'send',
      'messaging.operation.type': 'send',
    };
    if (queue !== undefined) attributes['messaging.destination.name'] = queue;
    if (type !== undefined) attributes['workhorse.job.type'] = type;
    if (jobs.length > 1) attributes['messaging.batch.message_count'] = jobs.length;
    const span = this.tracer.startSpan(queue === undefined ? 'send' : `send ${queue}`, { kind: SpanKind.PRODUCER, attributes }, parent);
    const carried = injectTraceContext(trace.setSpan(parent, span));
    return new EnqueueSpan(span, carried && JSON.stringify(carried));
  }

  /**
   * The CONSUMER span `process <queue>` of one attempt: the root of a trace of its own, linked to
   * the span that enqueued the job (when the job stored one).
   */
  startAttempt(job: ClaimedJob, stored: TraceContext | null): Span {
    const enqueuer = spanContextOf(stored);
    return this.tracer.startSpan(
      `process ${job.queue}`,
      {
        kind: SpanKind.CONSUMER,
        root: true,
        links: enqueuer ? [{ context: enqueuer }] : undefined,
        attributes: {
          'messaging.system': MESSAGING_SYSTEM,
          'messaging.operation.name': 'process',
          'messaging.operation.type': 'process',
          'messaging.destination.name': job.queue,
          'messaging.message.id': job.jobId,
          'workhorse.job.type': job.type,
          'workhorse.job.attempt': job.attempt,
        },
      },
      ROOT_CONTEXT,
    );
  }
}

/** Calls `fn(a, b)` with `span` active (as it is), so the spans and enqueues inside belong to it. */
export function runInSpan<A, B, R>(span: Span | null, fn: (a: A, b: B) => R, a: A, b: B): R {
  return span === null ? fn(a, b) : context.with(trace.setSpan(ROOT_CONTEXT, span), fn, undefined, a, b);
}

/**
 * Marks `span` as failed with `error` (an exception event, `error.type` and status ERROR). A
 * handler may throw anything, including an object whose `name`, `message` or `toString` throws:
 * the span then says only that the attempt failed, and the failure is still recorded.
 */
export function recordError(span: Span, error: unknown): void {
  try {
    if (error instanceof Error) {
      span.recordException(error);
      span.setAttribute('error.type', String(error.name));
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(error.message) });
    } else {
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
    }
  } catch {
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
}

/** The value every job has for `of`, or undefined when they differ. */
function common(jobs: readonly SentJob[], of: (job: SentJob) => string): string | undefined {
  const first = of(jobs[0]);
  return jobs.every((job) => of(job) === first) ? first : undefined;
}
