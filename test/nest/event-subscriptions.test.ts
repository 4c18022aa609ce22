/**
 * What the Nest worker asks of its core worker: the events it logs, those its
 * `@OnWorkhorseEvent` methods declare, and every event only while `events$` has a subscriber.
 * The core builds a per-job event (`job.claimed`, `job.succeeded`, ...) only when it is wanted,
 * so a Nest worker whose events nobody watches pays nothing for them on every job.
 */
import { Injectable } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { JobHandler, OnWorkhorseEvent, Queue, WorkhorseModule, WorkhorseWorker, type WorkerEvent, type WorkerEventName } from 'nestjs-workhorse';
import { waitForJobState } from 'nestjs-workhorse/testing';
import { EventHub } from '../../lib/core/worker/event-hub';
import { waitFor } from '../support/wait';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

@Injectable()
class Handlers {
  @JobHandler('ok')
  ok(): string {
    return 'done';
  }
}

@Injectable()
class SuccessCounter {
  succeeded = 0;

  @OnWorkhorseEvent('job.succeeded')
  onSucceeded(): void {
    this.succeeded++;
  }
}

const { db } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: () => moduleRef?.close(),
});
let moduleRef: TestingModule;
let built: WorkerEventName[];

beforeAll(async () => {
  quietNestLogs();
  moduleRef = await startModule({
    imports: [WorkhorseModule.forRoot({ connectionString: db.url, worker: { pollMs: 50, tickMs: 50 } })],
    providers: [Handlers, SuccessCounter],
  });
});

beforeEach(() => {
  built = [];
  const emit = EventHub.prototype.emit;
  jest.spyOn(EventHub.prototype, 'emit').mockImplementation(function (this: EventHub, event: WorkerEvent) {
    built.push(event.name);
    emit.call(this, event);
  });
});

afterEach(() => {
  jest.restoreAllMocks();
});

async function runOneJob(): Promise<string> {
  const jobId = await moduleRef.get(Queue).enqueue('ok', {});
  await waitForJobState(moduleRef, jobId, 'succeeded');
  // The success is reported a moment after it is recorded.
  await waitFor(() => built.includes('job.succeeded'), 10_000, 'job.succeeded to be built');
  return jobId;
}

it('builds only the per-job events an @OnWorkhorseEvent method declares while events$ has no subscriber', async () => {
  const counter = moduleRef.get(SuccessCounter);
  const before = counter.succeeded;
  await runOneJob();
  expect(counter.succeeded).toBe(before + 1);
  expect(built).not.toContain('job.claimed');
});

it('builds every event while events$ has a subscriber, and stops when the last one unsubscribes', async () => {
  const worker = moduleRef.get(WorkhorseWorker);
  const streamed: WorkerEvent[] = [];
  const first = worker.events$.subscribe((event) => streamed.push(event));
  const second = worker.events$.subscribe(() => undefined);
  const watched = await runOneJob();
  expect(streamed.filter((e) => 'jobId' in e && e.jobId === watched).map((e) => e.name)).toEqual(['job.claimed', 'job.succeeded']);

  first.unsubscribe();
  built = [];
  await runOneJob();
  expect(built).toContain('job.claimed'); // `second` still listens

  second.unsubscribe();
  built = [];
  const unwatched = await runOneJob();
  expect(built).not.toContain('job.claimed');
  expect(streamed.some((e) => 'jobId' in e && e.jobId === unwatched)).toBe(false);
});
