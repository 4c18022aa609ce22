/**
 * Typed job definitions at run time: defineJob checks its type, defaults and validators;
 * enqueue(definition) applies the defaults under the call's options and runs the payload
 * validator (zod, and a hand-written Standard Schema with an async validate) before anything is
 * written, refusing with JobDataRejectedError and the validator's issues; enqueueMany takes
 * definitions ({ job, payload }) beside types, all checked before anything is written; a result
 * validator's refusal fails the job at once (no retry); admin.getJob(definition) refuses a job of
 * another type. (What must not compile is in test/types/.)
 */
import {
  defineJob,
  JobDataRejectedError,
  Worker,
  WorkhorseValidationError,
  type StandardSchemaV1,
} from 'nestjs-workhorse/core';
import { z } from 'zod';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { db, queue, admin } = useTestDatabase();

async function jobCount(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM workhorse.job');
  return rows[0].n;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

describe('defineJob', () => {
  it.each([
    ['a bad type', () => defineJob(''), 'type'],
    ['an option that is not a default', () => defineJob('x', { runAt: new Date() } as never), 'runAt'],
    ['a bad default', () => defineJob('x', { priority: 101 }), 'priority'],
    ['a payload validator that is no Standard Schema', () => defineJob('x', { payload: { parse: () => 1 } as never }), 'payload'],
    ['a result validator that is no Standard Schema', () => defineJob('x', { result: z.string().parse as never }), 'result'],
  ])('refuses %s, naming it', (_label, define, field) => {
    let error: unknown;
    try {
      define();
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    expect(error).toMatchObject({ field });
  });
});

describe('enqueue(definition, payload)', () => {
  const report = defineJob<{ month: string }, { rows: number }>('report.build', {
    queue: 'reports',
    priority: 30,
    tags: ['monthly'],
    maxAttempts: 3,
  });

  it("gives the definition's defaults, under the call's own options", async () => {
    const byDefault = await admin.getJob(report, await queue.enqueue(report, { month: '2026-11' }));
    expect(byDefault).toMatchObject({ type: 'report.build', queue: 'reports', priority: 30, tags: ['monthly'], maxAttempts: 3 });
    const overridden = await admin.getJob(report, await queue.enqueue(report, { month: '2026-12' }, { priority: 90, queue: 'urgent' }));
    expect(overridden).toMatchObject({ queue: 'urgent', priority: 90, tags: ['monthly'], payload: { month: '2026-12' } });
  });

  it("refuses a payload its validator refuses, with the validator's issues, writing nothing", async () => {
    const email = defineJob('email.send', {
      payload: z.object({ to: z.email(), subject: z.string().trim().min(1), cc: z.array(z.email()).default([]) }),
    });
    const before = await jobCount();
    const error = await rejection(queue.enqueue(email, { to: 'not an address', subject: '   ', cc: [] }));
    expect(error).toBeInstanceOf(JobDataRejectedError);
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    const refused = error as JobDataRejectedError;
    expect(refused.field).toBe('payload');
    expect(refused.type).toBe('email.send');
    expect(refused.issues.map((issue) => issue.path)).toEqual([['to'], ['subject']]);
    expect(refused.message).toMatch(/^payload: refused by the validator of job type "email.send": to: .+; subject: .+/);
    expect(await jobCount()).toBe(before);

    // What the validator gives back (trimmed, defaults filled in) is what is stored.
    const id = await queue.enqueue(email, { to: 'ada@example.com', subject: '  Receipt  ' });
    expect((await admin.getJob(email, id))?.payload).toEqual({ to: 'ada@example.com', subject: 'Receipt', cc: [] });
  });

  it('works with any Standard Schema, an async validator included', async () => {
    const evenOnly: StandardSchemaV1<{ n: number }> = {
      '~standard': {
        version: 1,
        vendor: 'hand-written',
        validate: async (value) =>
          typeof (value as { n?: unknown }).n === 'number' && (value as { n: number }).n % 2 === 0
            ? { value: value as { n: number } }
            : { issues: [{ message: 'must be even', path: [{ key: 'n' }] }] },
      },
    };
    const even = defineJob('numbers.even', { payload: evenOnly });
    const error = await rejection(queue.enqueue(even, { n: 3 }));
    expect(error).toMatchObject({ field: 'payload', issues: [{ message: 'must be even' }] });
    expect((error as Error).message).toContain('n: must be even');
    expect(await admin.getJob(even, await queue.enqueue(even, { n: 4 }))).toMatchObject({ payload: { n: 4 } });
  });

  it('still refuses what is not JSON after validation, as the untyped enqueue does', async () => {
    const loose = defineJob<{ at: unknown }>('loose.job');
    const error = await rejection(queue.enqueue(loose, { at: new Date() }));
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    expect(error).toMatchObject({ field: 'payload.at' });
  });
});

describe('enqueueMany with definitions', () => {
  const email = defineJob('email.send', {
    queue: 'mail',
    priority: 40,
    payload: z.object({ to: z.email(), subject: z.string().trim().min(1) }),
  });
  const report = defineJob<{ month: string }>('report.build', { queue: 'reports', maxAttempts: 3 });

  it("validates each definition's payload and applies its defaults, beside requests by type, in one batch", async () => {
    const ids = await queue.enqueueMany([
      { job: email, payload: { to: 'ada@example.com', subject: '  Receipt  ' } },
      { job: report, payload: { month: '2026-11' }, priority: 90, dependsOn: [0] },
      { type: 'audit.log', payload: { event: 'sent' } },
    ]);
    expect(ids).toHaveLength(3);
    expect(await admin.getJob(email, ids[0])).toMatchObject({ queue: 'mail', priority: 40, payload: { to: 'ada@example.com', subject: 'Receipt' } });
    expect(await admin.getJob(report, ids[1])).toMatchObject({ queue: 'reports', priority: 90, maxAttempts: 3, state: 'blocked' });
    expect(await admin.getJob(ids[2])).toMatchObject({ type: 'audit.log', queue: 'default' });
  });

  it('refuses the whole batch when one payload is refused, naming its request, writing nothing', async () => {
    const before = await jobCount();
    const error = await rejection(
      queue.enqueueMany([
        { job: report, payload: { month: '2026-11' } },
        { job: email, payload: { to: 'nobody', subject: 'x' } },
      ]),
    );
    expect(error).toBeInstanceOf(JobDataRejectedError);
    expect(error).toMatchObject({ field: 'requests[1].payload', type: 'email.send', issues: [{ path: ['to'] }] });
    expect((error as Error).message).toMatch(/^requests\[1\]\.payload: refused by the validator of job type "email.send": to: /);
    expect(await jobCount()).toBe(before);
  });

  it.each([
    ['a job that is no definition', [{ job: 'email.send', payload: {} }], 'requests[0].job'],
    ['both a type and a definition', [{ type: 'email.send', job: report, payload: { month: '2026-11' } }], 'requests[0].type'],
  ])('refuses %s, naming it, writing nothing', async (_label, requests, field) => {
    const before = await jobCount();
    const error = await rejection(queue.enqueueMany(requests as never));
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    expect(error).toMatchObject({ field });
    expect(await jobCount()).toBe(before);
  });
});

describe('handlers and reads of a definition', () => {
  const label = defineJob('label.print', {
    queue: 'labels',
    payload: z.object({ orderId: z.string() }),
    result: z.object({ labelId: z.string().startsWith('lb_') }),
  });

  it.each([
    ['a plain handler', false],
    ['a transactional handler', true],
  ])('%s: records a result its validator accepts, and fails the job of one it refuses at once, with the issues', async (_label, transactional) => {
    const good = await queue.enqueue(label, { orderId: 'o-1' });
    const bad = await queue.enqueue(label, { orderId: 'o-2' });
    const worker = new Worker(queue, { queues: ['labels'], concurrency: 2, listen: false }).handle(
      label,
      async (payload) => ({ labelId: payload.orderId === 'o-1' ? 'lb_1' : 'oops' }),
      { transactional },
    );
    expect(await worker.runOnce()).toBe(2);
    expect(await admin.getJob(label, good)).toMatchObject({ state: 'succeeded', result: { labelId: 'lb_1' } });
    // Final, as a NonRetryableError: one attempt of the default 25, not a retry.
    const failed = await admin.getJob(label, bad);
    expect(failed).toMatchObject({ state: 'failed', currentAttempt: 1, maxAttempts: 25, result: null, error: { name: 'JobDataRejectedError' } });
    expect(failed?.error?.message).toMatch(/^result: refused by the validator of job type "label.print": labelId: .*lb_/);
  });

  it('admin.getJob(definition, id) refuses a job of another type', async () => {
    const other = await queue.enqueue('other.type', {});
    const error = await rejection(admin.getJob(label, other));
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    expect(error).toMatchObject({ field: 'jobId' });
    expect((error as Error).message).toContain('is a job of type "other.type", not "label.print"');
    expect(await admin.getJob(label, '01a2269c-6133-7123-8e3f-ea8c1cb9ab3c')).toBeNull();
  });
});

describe('ctx.runChild(key, definition, payload)', () => {
  const label = defineJob('label.print', { queue: 'typed-children', payload: z.object({ orderId: z.string() }), result: z.object({ labelId: z.string() }) });
  const parent = defineJob<{ orderId: unknown }, { labelId: string } | { refused: string }>('label.parent', { queue: 'typed-children' });

  it("starts the child with the definition's defaults and returns its result; a payload its validator refuses is a JobDataRejectedError before any child is written", async () => {
    const worker = new Worker(queue, { queues: ['typed-children'], pollMs: 50 })
      .handle(label, async (payload) => ({ labelId: `label-${payload.orderId}` }))
      .handle(parent, async (payload, ctx) => {
        try {
          return await ctx.runChild('label', label, { orderId: payload.orderId as string });
        } catch (error) {
          if (error instanceof JobDataRejectedError) return { refused: error.field };
          throw error;
        }
      });
    const good = await queue.enqueue(parent, { orderId: 'o-1' });
    const bad = await queue.enqueue(parent, { orderId: 42 });
    const running = worker.run();
    try {
      await waitFor(async () => (await admin.getJob(good))?.state === 'succeeded' && (await admin.getJob(bad))?.state === 'succeeded', 20_000, 'both parents to end');
    } finally {
      await worker.stop();
      await running;
    }
    const goodJob = await admin.getJob(good);
    expect(goodJob?.result).toEqual({ labelId: 'label-o-1' });
    expect(goodJob?.children).toHaveLength(1);
    expect((await admin.getJob(goodJob?.children?.[0]?.id as string))?.queue).toBe('typed-children');
    const badJob = await admin.getJob(bad);
    expect(badJob?.result).toEqual({ refused: 'payload' });
    expect(badJob?.children).toEqual([]);
  });
});
