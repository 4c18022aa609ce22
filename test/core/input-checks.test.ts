/**
 * Every string, date and options argument is checked before it reaches PostgreSQL (issue 15,
 * items 4 and 5): text with a NUL character or an unpaired UTF-16 surrogate (PostgreSQL refuses
 * the first with a raw 22021; node-postgres silently turns the second into U+FFFD) is refused
 * with a WorkhorseValidationError naming the field, as enqueue already did for payloads, and
 * nothing is written. Crafted cursors are InvalidCursorError, dates outside the years 1970 to
 * 9999 are refused the same way everywhere, `null` where an options object goes is a typed
 * error, and a batch over 16 MiB of JSON is refused before it is sent, without building it.
 *
 * The property: whatever text a caller passes to these inputs, the call either works or throws a
 * WorkhorseValidationError; never a DatabaseError.
 */
import fc from 'fast-check';
import {
  InvalidCursorError,
  LIMITS,
  Worker,
  WorkhorseValidationError,
  type HandlerContext,
} from '../../lib/core';
import { claim, fail } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { db, queue, admin } = useTestDatabase();
/** A dead letter, for the redrive calls. */
let dead: string;
/** A job that stays live, for cancel. */
let live: string;

const TABLES = ['job', 'job_runtime', 'job_outcome', 'job_event', 'job_redrive', 'queue_control', 'job_checkpoint', 'job_wait'] as const;

async function rowCounts(): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<Record<string, number>>(
    `SELECT ${TABLES.map((t) => `(SELECT count(*)::int FROM workhorse.${t}) AS ${t}`).join(', ')}`,
  );
  return rows[0];
}

beforeAll(async () => {
  dead = await queue.enqueue('checks.dead', {}, { queue: 'checks-dead', maxAttempts: 1 });
  for (const owner of await claim(db.pool, 'checks-dead')) await fail(db.pool, owner, { name: 'Declined', message: 'no' });
  live = await queue.enqueue('checks.live', {}, { queue: 'checks-live', runAt: new Date(Date.now() + 3_600_000) });
});

/** The field a WorkhorseValidationError names, or what else was thrown. */
function fieldOf(error: unknown): string {
  return error instanceof WorkhorseValidationError ? error.field : String(error);
}

/** Runs `body` in the handler of a job of its own on `queueName`, and resolves with what it returned. */
async function inHandler<T>(queueName: string, body: (ctx: HandlerContext) => Promise<T>): Promise<T> {
  const id = await queue.enqueue('checks.handler', {}, { queue: queueName });
  let value: T | undefined;
  const worker = new Worker(queue, { queues: [queueName], pollMs: 50, tickMs: 1000 }).handle('checks.handler', async (_p, ctx: HandlerContext) => {
    value = await body(ctx);
    return 'checked';
  });
  const done = worker.run();
  try {
    await waitFor(async () => (await admin.getJob(id))?.state === 'succeeded', 15_000, 'the handler to finish');
  } finally {
    await worker.stop();
    await done;
  }
  return value as T;
}

const BAD_TEXT = ['before\u0000after', '\u0000', 'lone \ud800 high', 'lone \udc00 low', '\udbff', 'pair reversed \udc00\ud800'];

/** Each text input of the public API, called with `text` in that one place. */
const TEXT_INPUTS: Record<string, { field: string; call: (text: string) => Promise<unknown> }> = {
  'cancel reason': { field: 'reason', call: (t) => admin.cancel(live, { reason: t }) },
  'cancel actor': { field: 'actor', call: (t) => admin.cancel(live, { actor: t }) },
  'pauseQueue actor': { field: 'actor', call: (t) => admin.pauseQueue('checks-pause', { actor: t }) },
  'pauseQueue reason': { field: 'reason', call: (t) => admin.pauseQueue('checks-pause', { reason: t }) },
  'resumeQueue actor': { field: 'actor', call: (t) => admin.resumeQueue('checks-pause', { actor: t }) },
  'redrive requestId': { field: 'requestId', call: (t) => admin.redrive(dead, { requestId: t }) },
  'redrive actor': { field: 'actor', call: (t) => admin.redrive(dead, { requestId: 'checks-1', actor: t }) },
  'redrive reason': { field: 'reason', call: (t) => admin.redrive(dead, { requestId: 'checks-1', reason: t }) },
  'redriveMany requestId': { field: 'requestId', call: (t) => admin.redriveMany({ queue: 'checks-none' }, { requestId: t }) },
  'redriveMany actor': { field: 'actor', call: (t) => admin.redriveMany({ queue: 'checks-none' }, { requestId: 'x', actor: t }) },
  'redriveMany errorName filter': { field: 'errorName', call: (t) => admin.redriveMany({ errorName: t }, { requestId: 'x', dryRun: true }) },
  'listDeadLetters errorName filter': { field: 'errorName', call: (t) => admin.listDeadLetters({ errorName: t }) },
  'worker id': { field: 'workerId', call: async (t) => new Worker(queue, { workerId: t }) },
};

describe('text inputs', () => {
  it.each(Object.entries(TEXT_INPUTS))('%s: a NUL or an unpaired surrogate is a typed error naming the field, and nothing is written', async (_name, input) => {
    const before = await rowCounts();
    for (const text of BAD_TEXT) {
      await expect(input.call(text)).rejects.toMatchObject({ constructor: WorkhorseValidationError, field: input.field });
    }
    expect(await rowCounts()).toEqual(before);
  });

  it('any text in any of them: the call works or is refused with a WorkhorseValidationError, never a database error', async () => {
    const text = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 30 }),
      fc.string({ maxLength: 1200 }),
      fc.constantFrom(...BAD_TEXT, "'; DROP TABLE workhorse.job; --", '\u001b]0;owned\u0007', 'x'.repeat(1001)),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...Object.keys(TEXT_INPUTS)), text, async (name, value) => {
        try {
          await TEXT_INPUTS[name].call(value);
        } catch (error) {
          expect(error).toBeInstanceOf(WorkhorseValidationError);
        }
      }),
      { numRuns: 150 },
    );
    await admin.resumeQueue('checks-pause');
  });

  it('checkpoint and sleep names in a handler: typed errors naming `name`', async () => {
    const { jobId, refusals } = await inHandler('checks-handler', async (ctx) => {
      const fields: string[] = [];
      for (const name of BAD_TEXT) {
        for (const call of [() => ctx.checkpoint(name, () => 1), () => ctx.sleep(name, 1), () => ctx.sleepUntil(name, new Date())]) {
          fields.push(await call().then(() => 'accepted', fieldOf));
        }
      }
      return { jobId: ctx.jobId, refusals: fields };
    });
    expect(refusals).toEqual(BAD_TEXT.flatMap(() => ['name', 'name', 'name']));
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM workhorse.job_checkpoint WHERE job_id = $1', [jobId]);
    expect(rows[0]).toEqual({ n: 0 });
  });
});

describe('dates', () => {
  const outside = [new Date('1969-12-31T23:59:59.999Z'), new Date('+010000-01-01T00:00:00.000Z'), new Date(Number.NaN)];

  it('are refused outside the years 1970 to 9999 in every place that takes one', async () => {
    for (const date of outside) {
      await expect(queue.enqueue('checks.date', {}, { runAt: date })).rejects.toMatchObject({ field: 'runAt' });
      await expect(queue.enqueue('checks.date', {}, { deadline: date })).rejects.toMatchObject({ field: 'deadline' });
      await expect(admin.listDeadLetters({ finishedAfter: date })).rejects.toMatchObject({ field: 'finishedAfter' });
      await expect(admin.redriveMany({ finishedBefore: date }, { requestId: 'x' })).rejects.toMatchObject({ field: 'finishedBefore' });
    }
    await expect(admin.listDeadLetters({ finishedAfter: new Date('9999-12-31T23:59:59.999Z') })).resolves.toMatchObject({ items: [] });
  });

  it('ctx.sleepUntil refuses them too, and sleep_v1 refuses a wake time past 9999 with P1001', async () => {
    const fields = await inHandler('checks-sleep-until', async (ctx) => {
      const refused: string[] = [];
      for (const date of outside) refused.push(await ctx.sleepUntil('nap', date).then(() => 'accepted', fieldOf));
      const { rows } = await db.pool.query<{ fence: string }>('SELECT fence_token AS fence FROM workhorse.job_runtime WHERE job_id = $1', [ctx.jobId]);
      const sql = await db.pool
        .query('SELECT * FROM workhorse.sleep_v1($1, $2, $3, $4, $5, NULL)', [ctx.jobId, ctx.workerId, rows[0].fence, 'nap', '10000-01-01T00:00:00Z'])
        .then(() => 'accepted', (e: { code?: string; column?: string }) => `${e.code}:${e.column}`);
      return [...refused, sql];
    });
    expect(fields).toEqual(['until', 'until', 'until', 'P1001:until']);
  });
});

describe('cursors', () => {
  const encode = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

  it('a crafted dead-letter cursor is an InvalidCursorError, year 0000 included (PostgreSQL has no year 0)', async () => {
    for (const text of [
      'dead:0000-01-01T00:00:00.000000Z/0190a000-0000-7000-8000-000000000000',
      'dead:1969-12-31T23:59:59.999999Z/0190a000-0000-7000-8000-000000000000',
      'dead:2030-02-30T00:00:00.000000Z/0190a000-0000-7000-8000-000000000000',
      'dead:2030-01-01T24:00:00.000000Z/0190a000-0000-7000-8000-000000000000',
      'dead:2030-01-01T00:00:00.000000Z/not-a-uuid',
      'jobs:1',
    ]) {
      await expect(admin.listDeadLetters({ cursor: encode(text) })).rejects.toBeInstanceOf(InvalidCursorError);
    }
  });

  it('any cursor text: a page or InvalidCursorError, never a database error', async () => {
    const position = fc.oneof(
      fc.tuple(fc.integer({ min: 0, max: 9999 }), fc.integer({ min: 0, max: 13 }), fc.integer({ min: 0, max: 32 }), fc.integer({ min: 0, max: 25 }))
        .map(([y, m, d, h]) => `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}T${String(h).padStart(2, '0')}:00:00.000000Z/0190a000-0000-7000-8000-000000000000`),
      fc.string({ maxLength: 80 }),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('dead', 'jobs', 'timeline'), position, async (kind, pos) => {
        const cursor = encode(`${kind}:${pos}`);
        for (const call of [() => admin.listDeadLetters({ cursor }), () => admin.listJobs({ cursor }), () => admin.getJobTimeline(dead, { cursor })]) {
          try {
            await call();
          } catch (error) {
            expect(error).toBeInstanceOf(InvalidCursorError);
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe('options objects', () => {
  it('null, an array or a string where an options object or filter goes is a typed error naming it', async () => {
    const calls: [string, () => Promise<unknown>][] = [
      ['filter', () => admin.listJobs(null as never)],
      ['filter', () => admin.listJobs([] as never)],
      ['options', () => admin.getJobTimeline(dead, null as never)],
      ['options', () => admin.listDeadLetters(null as never)],
      ['options', () => admin.listDeadLetters('queue' as never)],
      ['options', () => admin.cancel(live, null as never)],
      ['options', () => admin.pauseQueue('checks-pause', null as never)],
      ['options', () => admin.resumeQueue('checks-pause', [] as never)],
      ['options', () => admin.redrive(dead, null as never)],
      ['requestId', () => admin.redrive(dead, undefined as never)],
      ['filter', () => admin.redriveMany(null as never, { requestId: 'x' })],
      ['filter', () => admin.redriveMany(undefined as never, { requestId: 'x' })],
      ['options', () => admin.redriveMany({}, null as never)],
      ['bogus', () => admin.cancel(live, { bogus: 1 } as never)],
      ['bogus', () => admin.pauseQueue('checks-pause', { bogus: 1 } as never)],
      ['bogus', () => admin.getJobTimeline(dead, { bogus: 1 } as never)],
    ];
    const before = await rowCounts();
    for (const [field, call] of calls) await expect(call()).rejects.toMatchObject({ constructor: WorkhorseValidationError, field });
    expect(await rowCounts()).toEqual(before);
  });
});

describe('batch size', () => {
  const MB = 1_000_000;

  it(`refuses a batch over ${LIMITS.batchBytes} bytes of JSON before sending it, having read no more of it than the limit`, async () => {
    const before = await rowCounts();
    let read = 0;
    const big = 'x'.repeat(MB);
    // 600 requests of 1 MB each (the batch that once took 1.36 GB and crashed the client); each
    // payload counts the times it is read.
    const requests = Array.from({ length: 600 }, () => ({
      type: 'checks.batch',
      payload: {
        get data() {
          read++;
          return big;
        },
      },
    }));
    await expect(queue.enqueueMany(requests)).rejects.toMatchObject({ constructor: WorkhorseValidationError, field: 'requests' });
    // Each payload is read twice (checked, then written as JSON); 17 payloads pass the limit.
    expect(read).toBeLessThanOrEqual(2 * Math.ceil(LIMITS.batchBytes / MB));
    expect(await rowCounts()).toEqual(before);
  });

  it('accepts a batch under the limit, and enqueue_many_v1 refuses one over it from another client with P1003', async () => {
    const big = 'y'.repeat(MB);
    const ids = await queue.enqueueMany(Array.from({ length: 15 }, () => ({ type: 'checks.batch', payload: big, queue: 'checks-batch' })));
    expect(ids).toHaveLength(15);
    const before = await rowCounts();
    const over = JSON.stringify(Array.from({ length: 17 }, () => ({ type: 'checks.batch', payload: big, queue: 'checks-batch' })));
    await expect(db.pool.query('SELECT workhorse.enqueue_many_v1($1::jsonb)', [over])).rejects.toMatchObject({ code: 'P1003', column: 'requests' });
    expect(await rowCounts()).toEqual(before);
    for (const id of ids) await admin.cancel(id);
  });
});
