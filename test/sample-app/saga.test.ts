/**
 * The sample app's order saga over real HTTP, on its real AppModule (HTTP and a worker): an
 * order placed with lines is charged, waits (parked, `blocked`) for the warehouse's
 * `POST /orders/:id/shipped`, waits for a person's decision on a large refund
 * (`GET /refund-approvals`, `POST /orders/:id/refund-decision`), refunds, and succeeds; the card
 * is charged once however often the handler replays.
 */
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { HumanWait, JobSnapshot, TimelineEntry } from 'nestjs-workhorse';
import { AppModule } from '../../sample-app/app.module';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const LINES = [
  { item: 'Loom cards', amountCents: 4200 },
  { item: 'Difference engine', amountCents: 150_000 },
];

interface OrderResponse {
  order: { id: string; lines: unknown; jobId: string };
  job: (Omit<JobSnapshot, 'createdAt'> & { state: string }) | null;
  timeline: Array<Omit<TimelineEntry, 'at'> & { at: string }>;
}

describe('the order saga over HTTP', () => {
  const { db } = useTestDatabase({ beforeDrop: () => app?.close() });
  let app: INestApplication | undefined;
  let url: string;

  const post = (path: string, body: unknown) =>
    fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  async function place(lines: unknown): Promise<{ orderId: string; jobId: string }> {
    const response = await post('/orders', { customer: 'Ada Lovelace', lines });
    expect(response.status).toBe(201);
    return (await response.json()) as { orderId: string; jobId: string };
  }

  async function orderWhen(orderId: string, state: string, what: string): Promise<OrderResponse> {
    return waitFor(async () => {
      const body = (await (await fetch(`${url}/orders/${orderId}`)).json()) as OrderResponse;
      return body.job?.state === state ? body : null;
    }, 20_000, what);
  }

  async function calls(orderId: string): Promise<string[]> {
    const { rows } = await db.pool.query<{ operation: string }>('SELECT operation FROM sample_provider_calls WHERE order_id = $1 ORDER BY id', [
      orderId,
    ]);
    return rows.map((row) => row.operation);
  }

  beforeAll(async () => {
    app = await NestFactory.create(
      AppModule.register({ databaseUrl: db.url, applicationName: 'sample-saga', worker: { concurrency: 2, pollMs: 50 }, dashboard: false }),
      { logger: false, abortOnError: false },
    );
    await app.listen(0, '127.0.0.1');
    url = await app.getUrl();
  });

  it('charges, waits for the shipment, waits for approval of a large refund, refunds, and succeeds', async () => {
    const { orderId, jobId } = await place(LINES);
    const parked = await orderWhen(orderId, 'blocked', 'the saga to wait for the shipment');
    expect(parked.order.lines).toEqual(LINES);
    expect(parked.job).toMatchObject({ id: jobId, type: 'order.saga', currentAttempt: 1, workerId: null });
    expect(await calls(orderId)).toEqual(['charge']);

    const shipped = await post(`/orders/${orderId}/shipped`, { trackingId: 'T-1', missingLines: [1] });
    expect(shipped.status).toBe(200);
    expect(await shipped.json()).toEqual({ status: 'delivered' });
    // The warehouse retries its webhook: the same shipment is a duplicate, nothing changes.
    expect(await (await post(`/orders/${orderId}/shipped`, { trackingId: 'T-1', missingLines: [1] })).json()).toEqual({ status: 'duplicate' });

    const approval = await waitFor(async () => {
      const page = (await (await fetch(`${url}/refund-approvals`)).json()) as { items: HumanWait[] };
      return page.items.find((wait) => wait.jobId === jobId);
    }, 20_000, 'the refund to wait for a decision');
    expect(approval).toMatchObject({
      name: 'approve-refund',
      choices: ['approve', 'reject'],
      context: { orderId, customer: 'Ada Lovelace', refundCents: 150_000, missingItems: ['Difference engine'] },
    });
    expect((await orderWhen(orderId, 'blocked', 'the saga to park on the decision')).job?.currentAttempt).toBe(1);

    const refused = await post(`/orders/${orderId}/refund-decision`, { decision: 'maybe', actor: 'alice' });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { message: string[] }).message[0]).toMatch(/^decision: must be one of/);
    const decided = await post(`/orders/${orderId}/refund-decision`, { decision: 'approve', actor: 'alice', reason: 'warehouse lost it' });
    expect(decided.status).toBe(200);
    expect(await decided.json()).toEqual({ status: 'completed' });

    const done = await orderWhen(orderId, 'succeeded', 'the saga to finish');
    expect(done.job).toMatchObject({
      currentAttempt: 1,
      result: {
        chargeId: expect.stringMatching(/^ch_/),
        trackingId: 'T-1',
        lineReceipts: 2,
        refund: { cents: 150_000, decidedBy: 'alice', approved: true, refundId: expect.stringMatching(/^re_/) },
      },
    });
    // Charged once, refunded once, though the handler ran four times (after the signal, the
    // decision and the line receipts, one child job per line).
    expect(await calls(orderId)).toEqual(['charge', 'refund']);
    const kinds = done.timeline.filter((e) => e.source === 'event').map((e) => e.kind);
    expect(kinds.filter((k) => k === 'claimed')).toHaveLength(4);
    expect(kinds).toEqual(expect.arrayContaining(['waiting', 'signal_delivered', 'human_decided', 'succeeded']));
    const decision = done.timeline.find((e) => e.kind === 'human_decided');
    expect(decision?.data).toMatchObject({ decision: 'approve', actor: 'alice', reason: 'warehouse lost it' });
    expect(await (await post(`/orders/${orderId}/shipped`, { trackingId: 'T-2' })).json()).toMatchObject({ statusCode: 409 });
  });

  it('refunds a small amount without asking anyone, and takes a shipment sent before the saga waits', async () => {
    const { orderId } = await place(LINES);
    // Sent at once: the saga may not have reached its wait yet; the signal is kept for it.
    const shipped = (await (await post(`/orders/${orderId}/shipped`, { trackingId: 'T-3', missingLines: [0] })).json()) as { status: string };
    expect(['buffered', 'delivered']).toContain(shipped.status);
    const done = await orderWhen(orderId, 'succeeded', 'the saga to finish');
    expect(done.job?.result).toMatchObject({ trackingId: 'T-3', lineReceipts: 2, refund: { cents: 4200, decidedBy: null, approved: true } });
    expect(await calls(orderId)).toEqual(['charge', 'refund']);
  });

  it('answers 400 for a bad shipment, 404 for an unknown order and 409 for an order without lines', async () => {
    const { orderId } = await place(LINES);
    for (const body of [{}, { trackingId: 'T\n' }, { trackingId: 'T', missingLines: [-1] }, { trackingId: 'T', extra: 1 }]) {
      expect((await post(`/orders/${orderId}/shipped`, body)).status).toBe(400);
    }
    expect((await post('/orders/6f1c0a52-3a4e-4c8e-9a57-2a0e7d1e9b11/shipped', { trackingId: 'T' })).status).toBe(404);
    const single = (await (await post('/orders', { customer: 'Ada', item: 'Loom', amountCents: 100 })).json()) as { orderId: string };
    expect((await post(`/orders/${single.orderId}/shipped`, { trackingId: 'T' })).status).toBe(409);
    expect((await post(`/orders/${orderId}/refund-decision`, { decision: 'approve', actor: 'a' })).status).toBe(409);
    expect((await post('/orders', { customer: 'Ada', lines: [] })).status).toBe(400);
    expect((await post(`/orders/${orderId}/shipped`, { trackingId: 'T-4' })).status).toBe(200);
    await orderWhen(orderId, 'succeeded', 'the last saga to finish');
  });
});
