/**
 * `@JobHandler(type, { retry })`: the handler's retry policy applies to jobs enqueued without
 * one of their own, the job's own policy wins, and a bad policy fails at decoration time.
 */
import { Injectable } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { Admin, JobHandler, Queue, WorkhorseModule, type HandlerContext } from 'nestjs-workhorse';
import { waitForJobState } from 'nestjs-workhorse/testing';
import { WorkhorseConfigurationError } from '../../lib/nest/workhorse-configuration.error';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

@Injectable()
class FlakyHandlers {
  @JobHandler('flaky.handler-policy', { retry: { kind: 'fixed', delayMs: 300 } })
  flaky(_payload: unknown, ctx: HandlerContext): string {
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    return 'ok';
  }
}

const { db } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: () => moduleRef?.close(),
});
let moduleRef: TestingModule;

beforeAll(async () => {
  quietNestLogs();
  moduleRef = await startModule({
    imports: [WorkhorseModule.forRoot({ connectionString: db.url, worker: { pollMs: 50, tickMs: 50 } })],
    providers: [FlakyHandlers],
  });
});

async function retryEvent(jobId: string): Promise<Record<string, unknown>> {
  const timeline = await moduleRef.get(Admin).getJobTimeline(jobId);
  const event = timeline.items.find((e) => e.kind === 'retry_scheduled');
  expect(event).toBeDefined();
  return event?.data as Record<string, unknown>;
}

it("uses the handler's policy for a job enqueued without one", async () => {
  const id = await moduleRef.get(Queue).enqueue('flaky.handler-policy', {});
  await waitForJobState(moduleRef, id, 'succeeded', { timeoutMs: 15_000 });
  expect(await retryEvent(id)).toMatchObject({ delayMs: 300, delaySource: 'handler' });
});

it("lets the job's own policy win over the handler's", async () => {
  const id = await moduleRef.get(Queue).enqueue('flaky.handler-policy', {}, { retryPolicy: { kind: 'fixed', delayMs: 100 } });
  await waitForJobState(moduleRef, id, 'succeeded', { timeoutMs: 15_000 });
  expect(await retryEvent(id)).toMatchObject({ delayMs: 100, delaySource: 'job' });
});

it('refuses a bad retry policy when the class is declared', () => {
  expect(() => {
    class Bad {
      @JobHandler('bad.retry', { retry: { kind: 'fixed', delayMs: -1 } })
      handle(): void {}
    }
    return Bad;
  }).toThrow(WorkhorseConfigurationError);
});
