/**
 * Tracing through the Nest module: the injected `Queue` stores the caller's trace context, the
 * module's worker runs each `@JobHandler` in a CONSUMER span linked to it, and a job the handler
 * enqueues through the injected `Queue` points back at that span.
 */
import { Injectable } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { context, propagation, SpanKind, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { JobHandler, Queue, WorkhorseModule } from 'nestjs-workhorse';
import { waitForJobState } from 'nestjs-workhorse/testing';
import { waitFor } from '../support/wait';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

@Injectable()
class TracedHandlers {
  constructor(private readonly queue: Queue) {}

  @JobHandler('nest.traced')
  async traced(): Promise<string> {
    return this.queue.enqueue('nest.follow-up', {});
  }

  @JobHandler('nest.follow-up')
  followUp(): string {
    return 'done';
  }
}

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const { db } = useTestDatabase({ checkInvariants: false, beforeDrop: () => moduleRef?.close() });
let moduleRef: TestingModule;

beforeAll(async () => {
  quietNestLogs();
  // Registered before the module starts: its worker looks for a tracer when it starts.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  moduleRef = await startModule({
    imports: [WorkhorseModule.forRoot({ connectionString: db.url, worker: { pollMs: 50, tickMs: 50 } })],
    providers: [TracedHandlers],
  });
});

afterAll(async () => {
  trace.disable();
  propagation.disable();
  context.disable();
  await provider.shutdown();
});

it('links the handler to the enqueue, and what the handler enqueues to the handler', async () => {
  const id = await trace.getTracer('test').startActiveSpan('request', async (span) => {
    try {
      return await moduleRef.get(Queue).enqueue('nest.traced', {});
    } finally {
      span.end();
    }
  });
  await waitForJobState(moduleRef, id, 'succeeded', { timeoutMs: 15_000 });
  const spans = () => exporter.getFinishedSpans();
  const attemptOf = (jobId: string) => spans().find((s) => s.kind === SpanKind.CONSUMER && s.attributes['messaging.message.id'] === jobId);
  const producerOf = (jobId: string) => spans().find((s) => s.kind === SpanKind.PRODUCER && s.attributes['messaging.message.id'] === jobId);
  const attempt = await waitFor(() => attemptOf(id), 15_000, 'the span of the attempt');
  const followUpId = await resultOf(id);
  const followUpAttempt = await waitFor(() => attemptOf(followUpId), 15_000, "the span of the follow-up's attempt");

  const spanIdOf = (span: ReadableSpan | undefined) => span?.spanContext().spanId;
  expect(attempt.links.map((l) => l.context.spanId)).toEqual([spanIdOf(producerOf(id))]);
  // The follow-up was enqueued inside the handler: its PRODUCER span is a child of the attempt's.
  expect(producerOf(followUpId)?.parentSpanContext?.spanId).toBe(spanIdOf(attempt));
  expect(followUpAttempt.links.map((l) => l.context.spanId)).toEqual([spanIdOf(producerOf(followUpId))]);
});

async function resultOf(id: string): Promise<string> {
  const { rows } = await db.pool.query('SELECT result FROM workhorse.job_outcome WHERE job_id = $1', [id]);
  return rows[0].result as string;
}
