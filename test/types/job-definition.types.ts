/**
 * Compile-time contract of typed job definitions. test/types/type-tests.test.ts type-checks this
 * file and requires no diagnostic: every line marked `@ts-expect-error` must fail to compile (an
 * unused marker is itself an error), and every other line must compile. Never run.
 */
import { Injectable } from '@nestjs/common';
import { Admin, defineJob, JobHandler, Queue, Worker, type EnqueueRequest, type HandlerContext, type JobSnapshot } from 'nestjs-workhorse';
import { z } from 'zod';

declare const queue: Queue;
declare const admin: Admin;
declare const worker: Worker;
declare const jobId: string;

const fulfill = defineJob<{ orderId: string; amountCents: number }, { labelId: string }>('order.fulfill', { queue: 'orders' });

export async function enqueues(): Promise<void> {
  await queue.enqueue(fulfill, { orderId: 'o-1', amountCents: 4200 });
  await queue.enqueue(fulfill, { orderId: 'o-1', amountCents: 4200 }, { priority: 5 });
  // @ts-expect-error a payload of another shape
  await queue.enqueue(fulfill, { orderId: 42, amountCents: 4200 });
  // @ts-expect-error a missing field
  await queue.enqueue(fulfill, { orderId: 'o-1' });
  // @ts-expect-error an extra field
  await queue.enqueue(fulfill, { orderId: 'o-1', amountCents: 1, coupon: 'x' });
  // @ts-expect-error no payload
  await queue.enqueue(fulfill);
  // The untyped form stays as it was.
  await queue.enqueue('order.fulfill', { anything: true });
}

const report = defineJob<{ month: string }>('report.build');
const email = defineJob('email.send', { payload: z.object({ to: z.email(), cc: z.array(z.email()).default([]) }) });

export async function batches(requests: EnqueueRequest[]): Promise<void> {
  await queue.enqueueMany([
    { job: fulfill, payload: { orderId: 'o-1', amountCents: 4200 }, priority: 5 },
    { job: report, payload: { month: '2026-11' }, dependsOn: [0] },
    // A validator's input type: cc may be left out, its default fills it in.
    { job: email, payload: { to: 'ada@example.com' } },
    { type: 'audit.log', payload: { anything: true } },
  ]);
  await queue.enqueueMany(requests);
  const built = ['2026-11', '2026-12'].map((month) => ({ job: report, payload: { month } }));
  await queue.enqueueMany(built);
  // @ts-expect-error a payload of another shape
  await queue.enqueueMany([{ job: fulfill, payload: { orderId: 42, amountCents: 4200 } }]);
  // @ts-expect-error a wrong payload after a right one: each request is checked against its own definition
  await queue.enqueueMany([{ job: report, payload: { month: '2026-11' } }, { job: fulfill, payload: { month: '2026-11' } }]);
  // @ts-expect-error a missing field
  await queue.enqueueMany([{ job: fulfill, payload: { orderId: 'o-1' } }]);
  // @ts-expect-error an extra field
  await queue.enqueueMany([{ job: report, payload: { month: '2026-11', year: 2026 } }]);
  // @ts-expect-error a type beside the definition
  await queue.enqueueMany([{ job: report, type: 'report.build', payload: { month: '2026-11' } }]);
  const wrong = ['2026-11'].map((month) => ({ job: fulfill, payload: { month } }));
  // @ts-expect-error a built list of wrong payloads
  await queue.enqueueMany(wrong);
}

export async function children(ctx: HandlerContext): Promise<void> {
  const label: { labelId: string } = await ctx.runChild('label', fulfill, { orderId: 'o-1', amountCents: 1 });
  // @ts-expect-error a child payload of another shape
  await ctx.runChild('label', fulfill, { orderId: 1, amountCents: 1 });
  // @ts-expect-error the child's result is the definition's, not a string
  const wrong: string = await ctx.runChild('label', fulfill, { orderId: 'o-1', amountCents: 1 });
  void label;
  void wrong;
}

export function handlers(): void {
  worker.handle(fulfill, async (payload) => ({ labelId: `label-${payload.orderId}` }));
  worker.handle(fulfill, (payload: { orderId: string; amountCents: number }, ctx: HandlerContext) => ({ labelId: ctx.jobId }));
  // @ts-expect-error a result of another shape
  worker.handle(fulfill, async () => ({ label: 'x' }));
  // @ts-expect-error a payload field the definition does not have
  worker.handle(fulfill, async (payload) => ({ labelId: payload.customerId }));
  // @ts-expect-error a handler that expects another payload
  worker.handle(fulfill, async (payload: { invoiceId: string }) => ({ labelId: payload.invoiceId }));
}

@Injectable()
export class OrderHandlers {
  @JobHandler(fulfill)
  async fulfill(payload: { orderId: string; amountCents: number }): Promise<{ labelId: string }> {
    return { labelId: payload.orderId };
  }

  @JobHandler(fulfill, { transactional: true })
  async fulfillWithContext(payload: { orderId: string; amountCents: number }, ctx: HandlerContext): Promise<{ labelId: string }> {
    return { labelId: `${payload.orderId}:${ctx.attempt}` };
  }

  // @ts-expect-error the method returns another result
  @JobHandler(fulfill)
  async wrongResult(payload: { orderId: string; amountCents: number }): Promise<{ label: string }> {
    return { label: payload.orderId };
  }

  // @ts-expect-error the method takes another payload
  @JobHandler(fulfill)
  async wrongPayload(payload: { invoiceId: number }): Promise<{ labelId: string }> {
    return { labelId: String(payload.invoiceId) };
  }

  // @ts-expect-error a definition's handler takes its queue from the definition
  @JobHandler(fulfill, { queue: 'elsewhere' })
  async withQueue(payload: { orderId: string; amountCents: number }): Promise<{ labelId: string }> {
    return { labelId: payload.orderId };
  }
}

export async function reads(): Promise<void> {
  const job = await admin.getJob(fulfill, jobId);
  if (job === null) return;
  const orderId: string = job.payload.orderId;
  const labelId: string | undefined = job.result?.labelId;
  // @ts-expect-error the payload has no such field
  console.log(job.payload.customerId);
  // @ts-expect-error the result's field is a string
  const wrong: number | undefined = job.result?.labelId;
  const snapshot: JobSnapshot<{ orderId: string; amountCents: number }, { labelId: string }> = job;
  const untyped = await admin.getJob(jobId);
  console.log(orderId, labelId, wrong, snapshot, untyped?.payload);
}

// With a Standard Schema validator the types come from the schema.
const sendEmail = defineJob('email.send', {
  payload: z.object({ to: z.email(), subject: z.string().max(200) }),
  result: z.object({ messageId: z.string() }),
});

export async function fromSchemas(): Promise<void> {
  await queue.enqueue(sendEmail, { to: 'ada@example.com', subject: 'Receipt' });
  // @ts-expect-error the schema's payload needs a subject
  await queue.enqueue(sendEmail, { to: 'ada@example.com' });
  worker.handle(sendEmail, async (payload) => ({ messageId: `m-${payload.to}` }));
  // @ts-expect-error the schema's result needs a messageId string
  worker.handle(sendEmail, async () => ({ messageId: 1 }));
}

// A transforming schema: callers give its input, the handler gets its output.
const remind = defineJob('reminder.send', { payload: z.object({ days: z.string().transform((text) => Number(text)) }) });

export async function transformed(): Promise<void> {
  await queue.enqueue(remind, { days: '3' });
  // @ts-expect-error callers give the schema's input (a string)
  await queue.enqueue(remind, { days: 3 });
  worker.handle(remind, async (payload) => payload.days.toFixed(0));
}
