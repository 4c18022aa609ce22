/**
 * `@JobHandler(definition)` in a Nest app: the handler is registered under the definition's type
 * and queue, the injected Queue enqueues the definition into that queue (its payload validator
 * first), the worker checks results with the definition's result validator, and a queue in the
 * handler options of a definition is refused.
 */
import { Injectable } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { Admin, defineJob, JobDataRejectedError, JobHandler, Queue, WorkhorseModule, WorkhorseWorker } from 'nestjs-workhorse';
import { z } from 'zod';
import { WorkhorseConfigurationError } from '../../lib/nest/workhorse-configuration.error';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

const printLabel = defineJob('label.print', {
  queue: 'labels',
  payload: z.object({ orderId: z.string().min(1) }),
  result: z.object({ labelId: z.string().startsWith('lb_') }),
});

@Injectable()
class LabelHandlers {
  @JobHandler(printLabel)
  async print(payload: { orderId: string }): Promise<{ labelId: string }> {
    return { labelId: payload.orderId === 'broken' ? 'nope' : `lb_${payload.orderId}` };
  }
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
  const bad = await queue.enqueue(printLabel, { orderId: 'broken' }, { maxAttempts: 1 });
  await expect(queue.enqueue(printLabel, { orderId: '' })).rejects.toBeInstanceOf(JobDataRejectedError);

  expect(await app.get(WorkhorseWorker).runOnce({ queues: ['labels'] })).toBe(2);
  expect(await admin.getJob(printLabel, good)).toMatchObject({ queue: 'labels', state: 'succeeded', result: { labelId: 'lb_42' } });
  expect(await admin.getJob(printLabel, bad)).toMatchObject({ state: 'failed', error: { name: 'JobDataRejectedError' } });
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
