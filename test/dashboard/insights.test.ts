/**
 * The dashboard's reads for an incident, through Admin on a real database: finding jobs by tag,
 * payload and error (bounded without an index, direct with a GIN index on the payload), the run
 * and wait times of a page of jobs, timing percentiles per queue and type, failures grouped by
 * error; and the typed errors of bad input.
 */
import { NonRetryableError, WorkhorseValidationError } from '../../lib/core';
import { Worker } from '../../lib/core';
import { expectRejects } from '../support/expect-rejects';
import { useTestDatabase } from '../support/test-database';

const { db, queue, admin } = useTestDatabase({ checkInvariants: false });
const ids: Record<string, string> = {};

beforeAll(async () => {
  const jobs = await queue.enqueueMany([
    { type: 'order.ship', payload: { orderId: 1, customer: { country: 'NL' } }, queue: 'orders', tags: ['vip'] },
    { type: 'order.ship', payload: { orderId: 2, customer: { country: 'DE' } }, queue: 'orders' },
    { type: 'order.bill', payload: { orderId: 3, customer: { country: 'NL' } }, queue: 'billing', tags: ['vip'] },
  ]);
  [ids.nl, ids.de, ids.bill] = jobs;
  const worker = new Worker(queue, { queues: ['orders', 'billing'], concurrency: 1 })
    .handle('order.ship', async () => {
      await new Promise((resolve) => setTimeout(resolve, 40));
      return { ok: true };
    })
    .handle('order.bill', () => {
      throw new NonRetryableError('card_declined: 100% of 50_000 refused');
    });
  while ((await worker.runOnce()) > 0);
  ids.waiting = await queue.enqueue('order.ship', { orderId: 4 }, { queue: 'later', runAt: new Date(Date.now() + 3_600_000) });
});

describe('findJobs', () => {
  it('finds by payload containment, tag and error name or message, newest first', async () => {
    const byPayload = await admin.findJobs({ payload: { customer: { country: 'NL' } } });
    expect(byPayload.items.map((job) => job.id)).toEqual([ids.bill, ids.nl]);
    expect(byPayload.nextCursor).toBeNull();
    expect((await admin.findJobs({ tag: 'vip' })).items.map((job) => job.id)).toEqual([ids.bill, ids.nl]);
    expect((await admin.findJobs({ error: 'NonRetryableError' })).items.map((job) => job.id)).toEqual([ids.bill]);
    // Part of the message, any case; LIKE's wildcards in it are literal.
    expect((await admin.findJobs({ error: 'CARD_DECLINED: 100%' })).items.map((job) => job.id)).toEqual([ids.bill]);
    expect((await admin.findJobs({ error: 'card%declined' })).items).toEqual([]);
    expect((await admin.findJobs({ tag: 'vip', payload: { orderId: 1 } })).items.map((job) => job.id)).toEqual([ids.nl]);
  });

  it('examines at most scanLimit jobs without an index, and goes on with a cursor', async () => {
    const first = await admin.findJobs({ payload: { orderId: 1 }, scanLimit: 2 });
    expect(first.items).toEqual([]);
    expect(first.nextCursor).not.toBeNull();
    const second = await admin.findJobs({ payload: { orderId: 1 }, scanLimit: 2, cursor: first.nextCursor ?? undefined });
    expect(second.items.map((job) => job.id)).toEqual([ids.nl]);
    expect(second.nextCursor).toBeNull();
  });

  it('reads a GIN index on the payload when there is one: no scan limit applies', async () => {
    await db.pool.query('CREATE INDEX job_payload_gin ON workhorse.job USING gin (payload jsonb_path_ops)');
    try {
      const found = await admin.findJobs({ payload: { orderId: 1 }, scanLimit: 1 });
      expect(found.items.map((job) => job.id)).toEqual([ids.nl]);
      expect(found.nextCursor).toBeNull();
      const page = await admin.findJobs({ payload: { customer: { country: 'NL' } }, limit: 1 });
      expect(page.items.map((job) => job.id)).toEqual([ids.bill]);
      const next = await admin.findJobs({ payload: { customer: { country: 'NL' } }, limit: 1, cursor: page.nextCursor ?? undefined });
      expect(next.items.map((job) => job.id)).toEqual([ids.nl]);
    } finally {
      await db.pool.query('DROP INDEX workhorse.job_payload_gin');
    }
  });

  it('refuses a search without a filter and bad filters, naming the field', async () => {
    await expect(expectRejects(admin.findJobs({}), WorkhorseValidationError)).resolves.toMatchObject({ field: 'filter' });
    await expect(expectRejects(admin.findJobs({ payload: {} }), WorkhorseValidationError)).resolves.toMatchObject({ field: 'payload' });
    await expect(expectRejects(admin.findJobs({ tag: 'x'.repeat(201) }), WorkhorseValidationError)).resolves.toMatchObject({ field: 'tag' });
    await expect(expectRejects(admin.findJobs({ tag: 'x', limit: 0 }), WorkhorseValidationError)).resolves.toMatchObject({ field: 'limit' });
    await expect(expectRejects(admin.findJobs({ tag: 'x', cursor: 'nope' }), WorkhorseValidationError)).resolves.toMatchObject({ field: 'cursor' });
  });
});

describe('timings', () => {
  it('gives each job its latest run time and its wait before the first start', async () => {
    const durations = await admin.jobDurations([ids.nl, ids.bill, ids.waiting]);
    expect(durations.get(ids.nl)?.runMs).toBeGreaterThanOrEqual(40);
    expect(durations.get(ids.nl)?.waitMs).toBeGreaterThanOrEqual(0);
    expect(durations.get(ids.nl)?.startedAt).toBeInstanceOf(Date);
    expect(durations.get(ids.waiting)).toEqual({ startedAt: null, runMs: null, waitMs: null });
  });

  it('gives run and wait percentiles per queue and per type over a window', async () => {
    const since = new Date(Date.now() - 3_600_000);
    const perQueue = await admin.jobTimings({ since });
    expect(perQueue.map((row) => [row.name, row.attempts])).toEqual([['billing', 1], ['orders', 2]]);
    const orders = perQueue[1];
    expect(orders.run.p50).toBeGreaterThanOrEqual(40);
    expect(orders.run.p99).toBeGreaterThanOrEqual(orders.run.p50);
    expect(orders.wait?.p50).toBeGreaterThanOrEqual(0);
    expect(orders.sampled).toBe(false);
    const perType = await admin.jobTimings({ since, group: 'type', sample: 1 });
    expect(perType).toHaveLength(1);
    expect(perType[0].sampled).toBe(true);
    await expect(expectRejects(admin.jobTimings({ since: new Date(Date.now() - 8 * 86_400_000) }), WorkhorseValidationError)).resolves.toMatchObject({ field: 'since' });
    await expect(expectRejects(admin.jobTimings({ since, sample: 0 }), WorkhorseValidationError)).resolves.toMatchObject({ field: 'sample' });
  });

  it('groups failures by error name and message with counts, queues and first and last seen', async () => {
    const groups = await admin.errorGroups({ since: new Date(Date.now() - 3_600_000) });
    expect(groups).toEqual([
      { name: 'NonRetryableError', message: 'card_declined: 100% of 50_000 refused', failures: 1, queues: ['billing'], firstSeen: expect.any(Date), lastSeen: expect.any(Date) },
    ]);
    await expect(expectRejects(admin.errorGroups({ since: new Date(), limit: 500 }), WorkhorseValidationError)).resolves.toMatchObject({ field: 'limit' });
  });
});
