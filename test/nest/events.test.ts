/**
 * The worker's events in Nest: `events$` emits the core union in order for a success, a retry
 * and a failure; `ofWorkhorseEvent` filters it; `@OnWorkhorseEvent` methods receive the events;
 * a subscriber that throws is logged and never stops the worker; problems go to Nest's Logger.
 */
import { Injectable, Logger } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { firstValueFrom, lastValueFrom, toArray } from 'rxjs';
import {
  JobHandler,
  OnWorkhorseEvent,
  Queue,
  WorkhorseModule,
  WorkhorseWorker,
  ofWorkhorseEvent,
  type HandlerContext,
  type WorkerEvent,
  type WorkerEventOf,
} from 'nestjs-workhorse';
import { waitForJobState } from 'nestjs-workhorse/testing';
import { stateOf } from '../support/job-state';
import { waitFor } from '../support/wait';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

@Injectable()
class Handlers {
  @JobHandler('ok')
  ok(): string {
    return 'done';
  }

  @JobHandler('flaky')
  flaky(_payload: unknown, ctx: HandlerContext): string {
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    return 'second attempt works';
  }

  @JobHandler('broken')
  broken(): never {
    throw new TypeError('always broken');
  }
}

@Injectable()
class Watchers {
  readonly seen: WorkerEvent[] = [];

  @OnWorkhorseEvent('worker.started')
  @OnWorkhorseEvent('job.succeeded')
  @OnWorkhorseEvent('job.retry_scheduled')
  @OnWorkhorseEvent('job.failed')
  @OnWorkhorseEvent('worker.stopped')
  record(event: WorkerEvent): void {
    this.seen.push(event);
  }

  @OnWorkhorseEvent('job.claimed')
  throwsOnClaim(): void {
    throw new Error('subscriber bug (sync)');
  }

  @OnWorkhorseEvent('job.succeeded')
  async rejectsOnSuccess(): Promise<void> {
    throw new Error('subscriber bug (async)');
  }
}

const { db } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: async () => {
    if (!closed) await moduleRef?.close();
  },
});
let moduleRef: TestingModule;
let worker: WorkhorseWorker;
let watchers: Watchers;
let closed = false;
const errors: string[] = [];
const warnings: string[] = [];

beforeAll(async () => {
  quietNestLogs();
  jest.spyOn(Logger.prototype, 'error').mockImplementation((message: unknown) => void errors.push(String(message)));
  jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => void warnings.push(String(message)));
  moduleRef = await startModule({
    imports: [WorkhorseModule.forRoot({ connectionString: db.url, worker: { pollMs: 50, tickMs: 50, concurrency: 1 } })],
    providers: [Handlers, Watchers],
  });
  worker = moduleRef.get(WorkhorseWorker);
  watchers = moduleRef.get(Watchers);
});

afterAll(() => {
  jest.restoreAllMocks();
});

const retryFast = { maxAttempts: 3, retryPolicy: { kind: 'fixed' as const, delayMs: 0 } };

it('emits claimed/succeeded, claimed/retry_scheduled/claimed/succeeded and claimed/failed, in order', async () => {
  const events: WorkerEvent[] = [];
  const subscription = worker.events$.subscribe((event) => events.push(event));
  const queue = moduleRef.get(Queue);
  const ok = await queue.enqueue('ok', {});
  const flaky = await queue.enqueue('flaky', {}, retryFast);
  const broken = await queue.enqueue('broken', {}, { maxAttempts: 1 });
  await waitForJobState(moduleRef, ok, 'succeeded');
  await waitForJobState(moduleRef, flaky, 'succeeded');
  await waitForJobState(moduleRef, broken, 'failed');
  // The completion event follows the state change by a moment.
  await waitFor(() => events.some((e) => e.name === 'job.failed'), 10_000, 'job.failed on events$');
  subscription.unsubscribe();

  const of = (jobId: string) =>
    events.filter((e): e is Extract<WorkerEvent, { jobId: string }> => 'jobId' in e && e.jobId === jobId);
  expect(of(ok).map((e) => e.name)).toEqual(['job.claimed', 'job.succeeded']);
  expect(of(flaky).map((e) => [e.name, e.attempt])).toEqual([
    ['job.claimed', 1],
    ['job.retry_scheduled', 1],
    ['job.claimed', 2],
    ['job.succeeded', 2],
  ]);
  expect(of(broken).map((e) => e.name)).toEqual(['job.claimed', 'job.failed']);

  const retry = of(flaky)[1] as WorkerEventOf<'job.retry_scheduled'>;
  expect(retry).toMatchObject({ type: 'flaky', queue: 'default', error: { name: 'Error', message: 'first attempt fails' }, delayMs: 0 });
  expect(retry.runAt).toBeInstanceOf(Date);
  const failed = of(broken)[1] as WorkerEventOf<'job.failed'>;
  expect(failed.error).toMatchObject({ name: 'TypeError', message: 'always broken' });
  expect(failed.durationMs).toBeGreaterThanOrEqual(0);
  expect(failed.workerId).toEqual(expect.any(String));

  // Failures are logged as warnings; successes are not logged.
  expect(warnings.some((w) => w.includes(`Job ${failed.jobId} (broken) attempt 1 failed for good: TypeError: always broken`))).toBe(true);
  expect(warnings.some((w) => w.includes(`Job ${flaky} (flaky) attempt 1 failed`))).toBe(true);
  expect(warnings.some((w) => w.includes(ok))).toBe(false);
});

it('delivers events to @OnWorkhorseEvent methods, bound to their provider', () => {
  expect(watchers.seen[0]).toMatchObject({ name: 'worker.started', queues: ['default'], concurrency: 1 });
  const names = watchers.seen.map((e) => e.name);
  expect(names.filter((n) => n === 'job.succeeded')).toHaveLength(2);
  expect(names.filter((n) => n === 'job.retry_scheduled')).toHaveLength(1);
  expect(names.filter((n) => n === 'job.failed')).toHaveLength(1);
  expect(names).not.toContain('job.claimed');
});

it('logs a throwing subscriber and keeps processing', async () => {
  // Every claim above hit the throwing subscriber, and every job still finished.
  expect(errors.filter((e) => e.includes("@OnWorkhorseEvent('job.claimed') Watchers.throwsOnClaim threw: subscriber bug (sync)")).length).toBeGreaterThanOrEqual(4);
  await waitFor(
    () => errors.some((e) => e.includes("@OnWorkhorseEvent('job.succeeded') Watchers.rejectsOnSuccess threw: subscriber bug (async)")),
    10_000,
    'the rejected subscriber promise to be logged',
  );
  const jobId = await moduleRef.get(Queue).enqueue('ok', {});
  await expect(waitForJobState(moduleRef, jobId, 'succeeded')).resolves.toMatchObject({ result: 'done' });
});

it('filters with ofWorkhorseEvent, pauses and resumes, and completes events$ on shutdown', async () => {
  worker.pause();
  const jobId = await moduleRef.get(Queue).enqueue('ok', {});
  // Paused, the worker ignores the notification and its polls (absence needs a bounded wait).
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(await stateOf(db.pool, jobId)).toBe('ready');
  const succeeded = firstValueFrom(worker.events$.pipe(ofWorkhorseEvent('job.succeeded')));
  const all = lastValueFrom(worker.events$.pipe(toArray()));
  worker.resume();
  const event = await succeeded;
  expect(event).toMatchObject({ name: 'job.succeeded', jobId, type: 'ok' });

  await moduleRef.close();
  closed = true;
  const rest = await all; // completes: the stream ends with the application
  expect(rest.map((e) => e.name)).toContain('worker.stopped');
  expect(watchers.seen.at(-1)?.name).toBe('worker.stopped');
});
