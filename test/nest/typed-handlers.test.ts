/**
 * `@JobHandler(definition)` in a Nest app: the handler is registered under the definition's type
 * and queue, the injected Queue enqueues the definition into that queue (its payload validator
 * first), also when given the type's name and in enqueueMany; the worker checks results with the
 * definition's result validator (a refusal fails the job at once); an enqueue keeps the
 * transaction it started in while its validator runs; and a queue in the handler options of a
 * definition is refused.
 */
import { Injectable } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import {
  Admin,
  defineJob,
  JobDataRejectedError,
  JobHandler,
  Queue,
  WorkhorseModule,
  WorkhorseTransactionError,
  WorkhorseTransactionHost,
  WorkhorseWorker,
  type StandardSchemaV1,
} from 'nestjs-workhorse';
import { z } from 'zod';
import { WorkhorseConfigurationError } from '../../lib/nest/workhorse-configuration.error';
import { countJobs, quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

const printLabel = defineJob('label.print', {
  queue: 'labels',
  payload: z.object({ orderId: z.string().trim().min(1) }),
  result: z.object({ labelId: z.string().startsWith('lb_') }),
});

@Injectable()
class LabelHandlers {
  @JobHandler(printLabel)
  async print(payload: { orderId: string }): Promise<{ labelId: string }> {
    return { labelId: payload.orderId === 'broken' ? 'nope' : `lb_${payload.orderId}` };
  }

  @JobHandler('label.audit', { queue: 'audits' })
  audit(): void {}
}

const { db } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: () => app?.close(),
});
let app: TestingModule;

beforeAll(async () => {
  quietNestLogs();
  app = await startModule({
    imports: [WorkhorseModule.forRoot({ connectionString: db.url })],
    providers: [LabelHandlers],
  });
});

it("enqueues into the definition's queue, runs the handler and checks its result", async () => {
  const queue = app.get(Queue);
  const admin = app.get(Admin);
  const good = await queue.enqueue(printLabel, { orderId: '42' });
  const bad = await queue.enqueue(printLabel, { orderId: 'broken' });
  await expect(queue.enqueue(printLabel, { orderId: '' })).rejects.toBeInstanceOf(JobDataRejectedError);

  expect(await app.get(WorkhorseWorker).runOnce({ queues: ['labels'] })).toBe(2);
  expect(await admin.getJob(printLabel, good)).toMatchObject({ queue: 'labels', state: 'succeeded', result: { labelId: 'lb_42' } });
  // A refused result is final: the job failed after its first attempt of 25.
  expect(await admin.getJob(printLabel, bad)).toMatchObject({ state: 'failed', currentAttempt: 1, maxAttempts: 25, error: { name: 'JobDataRejectedError' } });
});

it("enqueues a defined type by its name as its definition: validated, into the definition's queue", async () => {
  const queue = app.get(Queue);
  const admin = app.get(Admin);
  const id = await queue.enqueue('label.print', { orderId: '  7  ' });
  expect(await admin.getJob(id)).toMatchObject({ queue: 'labels', payload: { orderId: '7' } });
  const before = await countJobs(db.pool, 'label.print');
  const error = await queue.enqueue('label.print', { orderId: '' }).catch((thrown: unknown) => thrown);
  expect(error).toBeInstanceOf(JobDataRejectedError);
  expect(error).toMatchObject({ field: 'payload', type: 'label.print' });
  expect(await countJobs(db.pool, 'label.print')).toBe(before);
});

it('enqueueMany validates defined jobs given by definition or by type name, routing each to its queue, all or nothing', async () => {
  const queue = app.get(Queue);
  const admin = app.get(Admin);
  const ids = await queue.enqueueMany([
    { job: printLabel, payload: { orderId: '8' } },
    { type: 'label.print', payload: { orderId: ' 9 ' } },
    { type: 'label.audit', payload: { orderId: '9' } },
  ]);
  expect(await admin.getJob(ids[0])).toMatchObject({ type: 'label.print', queue: 'labels', payload: { orderId: '8' } });
  expect(await admin.getJob(ids[1])).toMatchObject({ type: 'label.print', queue: 'labels', payload: { orderId: '9' } });
  expect(await admin.getJob(ids[2])).toMatchObject({ type: 'label.audit', queue: 'audits' });

  const before = await countJobs(db.pool, 'label.print');
  const error = await queue
    .enqueueMany([
      { job: printLabel, payload: { orderId: '10' } },
      { type: 'label.print', payload: { orderId: '' } },
    ])
    .catch((thrown: unknown) => thrown);
  expect(error).toBeInstanceOf(JobDataRejectedError);
  expect(error).toMatchObject({ field: 'requests[1].payload' });
  expect(await countJobs(db.pool, 'label.print')).toBe(before);
});

it('an enqueue started in a transaction stays in it, even when its validator answers after the transaction ended', async () => {
  const late: StandardSchemaV1<{ n: number }> = {
    '~standard': { version: 1, vendor: 'test', validate: (value) => new Promise((resolve) => setTimeout(() => resolve({ value: value as { n: number } }), 100)) },
  };
  const slow = defineJob('label.slow', { payload: late });
  const queue = app.get(Queue);
  let forgotten: Promise<string> | undefined;
  // A missing await: the transaction ends before the validator answers.
  await app.get(WorkhorseTransactionHost).run(async () => {
    forgotten = queue.enqueue(slow, { n: 1 });
  });
  await expect(forgotten).rejects.toBeInstanceOf(WorkhorseTransactionError);
  expect(await countJobs(db.pool, 'label.slow')).toBe(0);
});

it('refuses a queue in the handler options of a definition, saying where it belongs', () => {
  const decorate = () => {
    class Misplaced {
      @JobHandler(printLabel, { queue: 'elsewhere' } as object)
      print(): { labelId: string } {
        return { labelId: 'lb_1' };
      }
    }
    return Misplaced;
  };
  expect(decorate).toThrow(WorkhorseConfigurationError);
  expect(decorate).toThrow("give queue in defineJob('label.print', { queue }) instead of the handler options");
});
