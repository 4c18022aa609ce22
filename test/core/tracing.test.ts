/**
 * OpenTelemetry tracing: an enqueue under the caller's span records a PRODUCER span and stores
 * its W3C trace context with the job; each attempt runs in a CONSUMER span of its own trace that
 * links to it, with the handler's code inside, so child jobs point back at the parent's attempt.
 * Without an SDK nothing is stored and nothing breaks; a malformed trace context is refused.
 */
import { context, propagation, SpanKind, SpanStatusCode, trace, type Span, type TextMapPropagator, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Admin, NonRetryableError, Queue, Worker, WorkhorseValidationError, type JobHandlerFn } from '../../lib/core';
import { fromPgError } from '../../lib/core/protocol/errors';
import { activeTracer } from '../../lib/core/telemetry/job-tracing';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { pool } = useTestDatabase({ checkInvariants: false });

async function storedTraceContext(jobId: string): Promise<unknown> {
  const { rows } = await pool.query('SELECT trace_context FROM workhorse.job WHERE id = $1', [jobId]);
  return rows[0].trace_context;
}

async function waitForState(admin: Admin, id: string, state: string): Promise<void> {
  await waitFor(async () => (await admin.getJob(id))?.state === state, 20_000, `job ${id} to be ${state}`);
}

/** Runs a worker on `queue` with `handlers` until `done` holds, then stops it. */
async function runWorker(queue: string, handlers: Record<string, JobHandlerFn>, done: () => Promise<boolean>): Promise<void> {
  const worker = new Worker(new Queue(pool), { queues: [queue], pollMs: 20, tickMs: 50 });
  for (const [type, fn] of Object.entries(handlers)) worker.handle(type, fn);
  const running = worker.run();
  try {
    await waitFor(done, 20_000, `the jobs of ${queue} to end`);
  } finally {
    await worker.stop();
    await running;
  }
}

it('without an OpenTelemetry SDK: no tracer, nothing stored, jobs and child jobs run', async () => {
  expect(activeTracer()).toBeNull();
  const admin = new Admin(pool);
  const queue = new Queue(pool);
  const id = await queue.enqueue('plain.parent', {}, { queue: 'no-sdk' });
  const [batched] = await queue.enqueueMany([{ type: 'plain.child', payload: {}, queue: 'no-sdk' }]);
  await runWorker(
    'no-sdk',
    {
      'plain.parent': (_p, ctx) =>
        ctx.runChild('c', 'plain.child', {}, { queue: 'no-sdk' }),
      'plain.child': () => 'child done',
    },
    async () => (await admin.getJob(id))?.state === 'succeeded' && (await admin.getJob(batched))?.state === 'succeeded',
  );
  const { rows } = await pool.query("SELECT count(*)::int AS n, count(trace_context)::int AS traced FROM workhorse.job WHERE queue = 'no-sdk'");
  expect(rows[0]).toEqual({ n: 3, traced: 0 });
});

describe('with an OpenTelemetry SDK', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager();
  let tracer: Tracer;

  beforeAll(() => {
    context.setGlobalContextManager(contextManager.enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider(provider);
    tracer = trace.getTracer('test');
  });

  afterAll(async () => {
    trace.disable();
    propagation.disable();
    context.disable();
    await provider.shutdown();
  });

  beforeEach(() => exporter.reset());

  const spans = () => exporter.getFinishedSpans();
  const spanId = (span: ReadableSpan | Span) => span.spanContext().spanId;
  const traceparentOf = (span: ReadableSpan) => `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`;
  /** The CONSUMER spans of `jobId`'s attempts, in attempt order. */
  const attemptSpans = (jobId: string) =>
    spans()
      .filter((s) => s.kind === SpanKind.CONSUMER && s.attributes['messaging.message.id'] === jobId)
      .sort((a, b) => Number(a.attributes['workhorse.job.attempt']) - Number(b.attributes['workhorse.job.attempt']));

  /** Enqueues under an active span `request`, which ends before this returns. */
  function underSpan<T>(work: () => Promise<T>): Promise<T> {
    return tracer.startActiveSpan('request', async (span) => {
      try {
        return await work();
      } finally {
        span.end();
      }
    });
  }

  it('an enqueue under a span stores its PRODUCER span; the attempt runs in a CONSUMER span linked to it', async () => {
    const admin = new Admin(pool);
    const queue = new Queue(pool);
    const id = await underSpan(() => queue.enqueue('traced.ok', { n: 1 }, { queue: 'traced' }));

    const request = spans().find((s) => s.name === 'request')!;
    const producer = spans().find((s) => s.kind === SpanKind.PRODUCER)!;
    expect(producer.name).toBe('send traced');
    expect(producer.parentSpanContext?.spanId).toBe(spanId(request));
    expect(producer.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(producer.attributes).toEqual({
      'messaging.system': 'workhorse',
      'messaging.operation.name': 'send',
      'messaging.operation.type': 'send',
      'messaging.destination.name': 'traced',
      'messaging.message.id': id,
      'workhorse.job.type': 'traced.ok',
    });
    expect(await storedTraceContext(id)).toEqual({ traceparent: traceparentOf(producer) });

    let insideHandler: ReadableSpan | undefined;
    await runWorker(
      'traced',
      {
        'traced.ok': () =>
          tracer.startActiveSpan('handler work', (span) => {
            span.end();
            return 'ok';
          }),
      },
      async () => attemptSpans(id).length === 1,
    );
    await waitForState(admin, id, 'succeeded');
    const [attempt] = attemptSpans(id);
    expect(attempt.name).toBe('process traced');
    // A trace of its own (no parent), linked to the enqueue's span.
    expect(attempt.parentSpanContext).toBeUndefined();
    expect(attempt.spanContext().traceId).not.toBe(producer.spanContext().traceId);
    expect(attempt.links.map((l) => [l.context.traceId, l.context.spanId])).toEqual([[producer.spanContext().traceId, spanId(producer)]]);
    expect(attempt.attributes).toEqual({
      'messaging.system': 'workhorse',
      'messaging.operation.name': 'process',
      'messaging.operation.type': 'process',
      'messaging.destination.name': 'traced',
      'messaging.message.id': id,
      'workhorse.job.type': 'traced.ok',
      'workhorse.job.attempt': 1,
      'workhorse.job.outcome': 'succeeded',
    });
    expect(attempt.status.code).toBe(SpanStatusCode.UNSET);
    // The handler's own spans are children of its attempt's span.
    insideHandler = spans().find((s) => s.name === 'handler work');
    expect(insideHandler?.parentSpanContext?.spanId).toBe(spanId(attempt));
  });

  it('a failed attempt records the error on its span; the retry links to the same enqueue', async () => {
    const admin = new Admin(pool);
    const id = await underSpan(() =>
      new Queue(pool).enqueue('traced.flaky', {}, { queue: 'flaky', retryPolicy: { kind: 'fixed', delayMs: 0 } }),
    );
    const producer = spans().find((s) => s.kind === SpanKind.PRODUCER)!;
    await runWorker(
      'flaky',
      {
        'traced.flaky': (_p, ctx) => {
          if (ctx.attempt === 1) throw new TypeError('boom');
          return 'second time';
        },
      },
      async () => attemptSpans(id).length === 2,
    );
    await waitForState(admin, id, 'succeeded');
    const [first, second] = attemptSpans(id);
    expect(first.status).toEqual({ code: SpanStatusCode.ERROR, message: 'boom' });
    expect(first.attributes['error.type']).toBe('TypeError');
    expect(first.attributes['workhorse.job.outcome']).toBe('retry_scheduled');
    expect(first.events.map((e) => [e.name, e.attributes?.['exception.message']])).toEqual([['exception', 'boom']]);
    expect(second.status.code).toBe(SpanStatusCode.UNSET);
    expect(second.attributes['workhorse.job.attempt']).toBe(2);
    for (const attempt of [first, second]) expect(attempt.links.map((l) => l.context.spanId)).toEqual([spanId(producer)]);
  });

  it('whatever a handler throws, the failure is recorded: a throwing name getter or toString only leaves the span without a message', async () => {
    const admin = new Admin(pool);
    const namelessError = new Error('hidden');
    Object.defineProperty(namelessError, 'name', { get: () => { throw new Error('no name for you'); } });
    const unprintable = { toString: () => { throw new Error('no string for you'); }, toJSON: () => { throw new Error('no JSON either'); } };
    const ids = await underSpan(() =>
      new Queue(pool).enqueueMany([
        { type: 'traced.hostile', payload: { throwing: 'name' }, queue: 'hostile-errors', maxAttempts: 1 },
        { type: 'traced.hostile', payload: { throwing: 'object' }, queue: 'hostile-errors', maxAttempts: 1 },
      ]),
    );
    await runWorker(
      'hostile-errors',
      {
        'traced.hostile': (payload) => {
          throw (payload as { throwing: string }).throwing === 'name' ? namelessError : unprintable;
        },
      },
      async () => ids.every((id) => attemptSpans(id).length === 1),
    );
    for (const id of ids) {
      await waitForState(admin, id, 'failed');
      const [attempt] = attemptSpans(id);
      expect(attempt.status.code).toBe(SpanStatusCode.ERROR);
      expect(attempt.attributes['workhorse.job.outcome']).toBe('failed');
    }
  });

  it("a child job's trace context points at its parent's attempt, through the PRODUCER span of ctx.runChild", async () => {
    const admin = new Admin(pool);
    const parentId = await underSpan(() => new Queue(pool).enqueue('traced.parent', {}, { queue: 'family' }));
    let childId: string | undefined;
    await runWorker(
      'family',
      {
        'traced.parent': (_p, ctx) =>
          ctx.runChild('c', 'traced.child', {}, { queue: 'family' }),
        'traced.child': (_p, ctx) => {
          childId = ctx.jobId;
          return 'child done';
        },
      },
      async () => (await admin.getJob(parentId))?.state === 'succeeded' && childId !== undefined && attemptSpans(childId).length === 1,
    );
    // The parent's first attempt started the child and parked; the second took its outcome.
    const parentAttempt = attemptSpans(parentId)[0];
    const childProducer = spans().find((s) => s.kind === SpanKind.PRODUCER && s.attributes['workhorse.job.type'] === 'traced.child')!;
    expect(childProducer.parentSpanContext?.spanId).toBe(spanId(parentAttempt));
    expect(childProducer.spanContext().traceId).toBe(parentAttempt.spanContext().traceId);
    expect(await storedTraceContext(childId!)).toEqual({ traceparent: traceparentOf(childProducer) });
    expect(attemptSpans(childId!)[0].links.map((l) => l.context.spanId)).toEqual([spanId(childProducer)]);
  });

  it('a batch shares one PRODUCER span; without an active span nothing is traced or stored', async () => {
    const queue = new Queue(pool);
    const ids = await underSpan(() =>
      queue.enqueueMany([
        { type: 'a', payload: {}, queue: 'batch' },
        { type: 'b', payload: {}, queue: 'batch' },
      ]),
    );
    const producer = spans().find((s) => s.kind === SpanKind.PRODUCER)!;
    expect(producer.name).toBe('send batch');
    expect(producer.attributes['messaging.batch.message_count']).toBe(2);
    expect(producer.attributes['workhorse.job.type']).toBeUndefined();
    for (const id of ids) expect(await storedTraceContext(id)).toEqual({ traceparent: traceparentOf(producer) });

    exporter.reset();
    const untraced = await queue.enqueue('a', {}, { queue: 'batch' });
    expect(spans()).toEqual([]);
    expect(await storedTraceContext(untraced)).toBeNull();
  });

  it('a redriven dead letter keeps the trace context of the enqueue that asked for the work', async () => {
    const admin = new Admin(pool);
    const id = await underSpan(() => new Queue(pool).enqueue('traced.doomed', {}, { queue: 'doomed' }));
    await runWorker(
      'doomed',
      {
        'traced.doomed': () => {
          throw new NonRetryableError('never');
        },
      },
      async () => (await admin.getJob(id))?.state === 'failed',
    );
    const again = await admin.redrive(id, { requestId: 'tracing-redrive' });
    expect(await storedTraceContext(again)).toEqual(await storedTraceContext(id));
    await admin.cancel(again);
  });

  it('a propagator that writes a malformed traceparent: the enqueue succeeds and stores nothing', async () => {
    const broken: TextMapPropagator = {
      inject: (_ctx, carrier, setter) => setter.set(carrier, 'traceparent', '00-not-a-trace-context'),
      extract: (ctx) => ctx,
      fields: () => ['traceparent'],
    };
    propagation.disable();
    propagation.setGlobalPropagator(broken);
    try {
      const id = await underSpan(() => new Queue(pool).enqueue('a', {}, { queue: 'broken-propagator' }));
      expect(await storedTraceContext(id)).toBeNull();
      await new Admin(pool).cancel(id);
    } finally {
      propagation.disable();
      propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    }
  });
});

describe('the protocol refuses a malformed traceContext (P1001, naming the field) and writes nothing', () => {
  const good = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const bad: [string, unknown][] = [
    ['not an object', good],
    ['no traceparent', { tracestate: 'a=b' }],
    ['another key', { traceparent: good, baggage: 'x=1' }],
    ['garbage', { traceparent: '00-xyz' }],
    ['upper case hex', { traceparent: good.toUpperCase() }],
    ['another version', { traceparent: `01${good.slice(2)}` }],
    ['zero trace id', { traceparent: `00-${'0'.repeat(32)}-b7ad6b7169203331-01` }],
    ['zero span id', { traceparent: `00-0af7651916cd43dd8448eb211c80319c-${'0'.repeat(16)}-01` }],
    ['a trailing newline', { traceparent: `${good}\n` }],
    ['tracestate not a string', { traceparent: good, tracestate: 1 }],
    ['tracestate with a control character', { traceparent: good, tracestate: 'a=b\u0001' }],
    ['tracestate too long', { traceparent: good, tracestate: 'a'.repeat(513) }],
  ];

  async function enqueueRaw(traceContext: unknown, extra: object = {}): Promise<string> {
    const request = [{ type: 'raw', payload: {}, queue: 'raw', traceContext, ...extra }];
    const { rows } = await pool.query('SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)', [JSON.stringify(request)]);
    return rows[0].job_id;
  }

  it.each(bad)('%s', async (_what, traceContext) => {
    const before = (await pool.query('SELECT count(*)::int AS n FROM workhorse.job')).rows[0].n;
    for (const extra of [{}, { tags: ['slow path'] }]) {
      const error = await enqueueRaw(traceContext, extra).then(
        () => null,
        (e: unknown) => fromPgError(e),
      );
      expect(error).toBeInstanceOf(WorkhorseValidationError);
      expect((error as WorkhorseValidationError).field).toBe('requests[0].traceContext');
    }
    expect((await pool.query('SELECT count(*)::int AS n FROM workhorse.job')).rows[0].n).toBe(before);
  });

  it('accepts a well-formed one (tracestate kept) and null (nothing stored); the claim returns it', async () => {
    const traced = await enqueueRaw({ traceparent: good, tracestate: 'vendor=abc,other=1' });
    const none = await enqueueRaw(null);
    expect(await storedTraceContext(traced)).toEqual({ traceparent: good, tracestate: 'vendor=abc,other=1' });
    expect(await storedTraceContext(none)).toBeNull();
    const { rows } = await pool.query(
      "SELECT job_id, trace_context FROM workhorse.claim_many_v1('{raw}', 'tracing-test', 10, 30000) ORDER BY job_id",
    );
    expect(Object.fromEntries(rows.map((r) => [r.job_id, r.trace_context]))).toEqual({
      [traced]: { traceparent: good, tracestate: 'vendor=abc,other=1' },
      [none]: null,
    });
  });
});
