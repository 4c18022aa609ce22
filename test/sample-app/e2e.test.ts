/**
 * The sample app end to end, in process: its real AppModule (HTTP and a worker) on a fresh test
 * database, driven over real HTTP. An order is stored with its job in one transaction and
 * fulfilled by the worker; invalid orders and failed transactions leave nothing behind; closing
 * the application leaves no connection and no server open.
 */
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Admin, Queue, type JobSnapshot, type TimelineEntry } from 'nestjs-workhorse';
import { AppModule } from '../../sample-app/app.module';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const APPLICATION_NAME = 'sample-e2e';
const ORDER = { customer: 'Ada Lovelace', item: 'Loom cards', amountCents: 4200 };
/** The table of README.md's Quickstart (its "Create the table" step). */
const QUICKSTART_ORDERS = 'CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, amount_cents integer NOT NULL)';

interface OrderResponse {
  order: { id: string; customer: string; item: string; amountCents: number; jobId: string; createdAt: string };
  job: (Omit<JobSnapshot, 'createdAt'> & { state: string }) | null;
  timeline: Array<Omit<TimelineEntry, 'at'> & { at: string }>;
}

describe('sample app over HTTP', () => {
  const { db } = useTestDatabase({ beforeDrop: () => app?.close() });
  let app: INestApplication | undefined;
  let url: string;

  const post = (body: unknown) =>
    fetch(`${url}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  const counts = async () => {
    const { rows } = await db.pool.query<{ orders: number; jobs: number }>(
      "SELECT (SELECT count(*)::int FROM sample_orders) AS orders, (SELECT count(*)::int FROM workhorse.job WHERE type = 'order.fulfill') AS jobs",
    );
    return rows[0];
  };

  beforeAll(async () => {
    // The README Quickstart's own table, in the same database: the sample's tables must not collide with it.
    await db.pool.query(QUICKSTART_ORDERS);
    app = await NestFactory.create(
      AppModule.register({
        databaseUrl: db.url,
        applicationName: APPLICATION_NAME,
        worker: { concurrency: 2, pollMs: 50 },
        dashboard: false,
        queueDepth: 'all',
      }),
      { logger: false, abortOnError: false },
    );
    await app.listen(0, '127.0.0.1');
    url = await app.getUrl();
  });

  it("creates its tables at start-up, under names of their own beside the Quickstart's orders table", async () => {
    const { rows } = await db.pool.query<{ name: string }>(
      "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    );
    expect(rows.map((row) => row.name)).toEqual(['orders', 'sample_orders', 'sample_provider_calls']);
  });

  it('places an order, the worker fulfils it, and GET /orders/:id shows the job succeeded with its result', async () => {
    const created = await post(ORDER);
    expect(created.status).toBe(201);
    const { orderId, jobId } = (await created.json()) as { orderId: string; jobId: string };
    expect(orderId).toMatch(/^[0-9a-f-]{36}$/);

    const shown = await waitFor(async () => {
      const response = await fetch(`${url}/orders/${orderId}`);
      expect(response.status).toBe(200);
      const body = (await response.json()) as OrderResponse;
      return body.job?.state === 'succeeded' ? body : null;
    }, 20_000, 'the order to be fulfilled');

    expect(shown.order).toEqual({ id: orderId, ...ORDER, lines: null, jobId, createdAt: expect.any(String) });
    expect(shown.job).toMatchObject({
      id: jobId,
      type: 'order.fulfill',
      queue: 'orders',
      payload: { orderId },
      state: 'succeeded',
      currentAttempt: 1,
      result: { chargeId: expect.stringMatching(/^ch_/), labelId: expect.stringMatching(/^lb_/) },
    });
    const kinds = shown.timeline.map((entry) => `${entry.source}:${entry.kind}${entry.data?.name ? `:${String(entry.data.name)}` : ''}`);
    expect(kinds).toEqual([
      'event:enqueued',
      'event:claimed',
      'event:checkpoint_saved:charge',
      'event:checkpoint_saved:label',
      'attempt:succeeded',
      'event:succeeded',
    ]);

    const calls = await db.pool.query<{ operation: string; reference: string; idempotency_key: string }>(
      'SELECT operation, reference, idempotency_key FROM sample_provider_calls WHERE order_id = $1 ORDER BY id',
      [orderId],
    );
    const result = shown.job?.result as { chargeId: string; labelId: string };
    expect(calls.rows).toEqual([
      { operation: 'charge', reference: result.chargeId, idempotency_key: `order:${orderId}:charge` },
      { operation: 'label', reference: result.labelId, idempotency_key: `order:${orderId}:label` },
    ]);
  });

  it.each<[string, unknown, RegExp]>([
    ['a negative amount', { ...ORDER, amountCents: -5 }, /^amountCents: must be a positive integer/],
    ['a zero amount', { ...ORDER, amountCents: 0 }, /^amountCents: /],
    ['a fractional amount', { ...ORDER, amountCents: 42.5 }, /^amountCents: /],
    ['an amount as a string', { ...ORDER, amountCents: '4200' }, /^amountCents: /],
    ['an amount above the limit', { ...ORDER, amountCents: 100_000_001 }, /^amountCents: .*at most 100000000/],
    ['no customer', { item: ORDER.item, amountCents: 4200 }, /^customer: must be a non-empty string/],
    ['a blank customer', { ...ORDER, customer: '   ' }, /^customer: /],
    ['a customer with a NUL character', { ...ORDER, customer: 'Ada\u0000' }, /^customer: must not contain control characters/],
    ['an item of 201 characters', { ...ORDER, item: 'x'.repeat(201) }, /^item: .*at most 200 characters/],
    ['an unknown field', { ...ORDER, coupon: 'FREE' }, /^coupon: unknown field/],
    ['an array', [ORDER], /^body: must be a JSON object/],
  ])('answers 400 naming the field for %s, and writes nothing', async (_case, body, message) => {
    const before = await counts();
    const response = await post(body);
    expect(response.status).toBe(400);
    const answer = (await response.json()) as { message: string[] };
    expect(answer.message).toEqual([expect.stringMatching(message)]);
    expect(await counts()).toEqual(before);
  });

  it('reports every bad field at once', async () => {
    const response = await post({ amountCents: 1.5 });
    expect(response.status).toBe(400);
    const answer = (await response.json()) as { message: string[] };
    expect(answer.message.map((line) => line.split(':')[0])).toEqual(['customer', 'item', 'amountCents']);
  });

  it('rolls the job back with the order when the transaction fails after the enqueue', async () => {
    // The order INSERT runs after the enqueue in the same transaction; make it fail.
    await db.pool.query(`
      CREATE FUNCTION refuse_order() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'orders are closed'; END $$;
      CREATE TRIGGER refuse_order BEFORE INSERT ON sample_orders FOR EACH ROW EXECUTE FUNCTION refuse_order();`);
    try {
      const before = await counts();
      const response = await post(ORDER);
      expect(response.status).toBe(500);
      expect(await counts()).toEqual(before);
    } finally {
      await db.pool.query('DROP TRIGGER refuse_order ON sample_orders; DROP FUNCTION refuse_order()');
    }
  });

  it('answers 404 for an unknown order and 400 for an id that is not a UUID', async () => {
    const unknown = await fetch(`${url}/orders/6f1c0a52-3a4e-4c8e-9a57-2a0e7d1e9b11`);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { message: string }).message).toBe('order 6f1c0a52-3a4e-4c8e-9a57-2a0e7d1e9b11 not found');
    expect((await fetch(`${url}/orders/not-an-id`)).status).toBe(400);
  });

  it('serves GET /health (Terminus over admin.health) and GET /metrics (OpenTelemetry, Prometheus text)', async () => {
    const created = await post(ORDER);
    const { jobId } = (await created.json()) as { jobId: string };
    await waitFor(async () => (await db.pool.query("SELECT 1 FROM workhorse.job_outcome WHERE job_id = $1 AND state = 'succeeded'", [jobId])).rowCount === 1, 20_000, 'the order to be fulfilled');

    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: 'ok', info: { queue: { status: 'up', level: 'ok' } } });

    const scrape = await fetch(`${url}/metrics`);
    expect(scrape.status).toBe(200);
    const text = await scrape.text();
    const value = (metric: string) => Number(new RegExp(`^${metric}\\{[^}]*queue="orders",type="order.fulfill"[^}]*\\} (\\d+)`, 'm').exec(text)?.[1]);
    expect(value('workhorse_jobs_enqueued_total')).toBeGreaterThanOrEqual(1);
    expect(value('workhorse_jobs_succeeded_total')).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/^workhorse_job_run_time_count\{[^}]*queue="orders"/m);
    expect(text).toMatch(/^workhorse_queue_depth\{[^}]*queue="orders",state="ready"[^}]*\} 0/m);

    // A queue no worker serves (queueDepth: 'all', as in main.ts and api.ts) shows up too.
    const stuck = await new Queue(db.pool).enqueue('nobody.serves', {}, { queue: 'sample-stuck' });
    const again = await (await fetch(`${url}/metrics`)).text();
    expect(again).toMatch(/^workhorse_queue_depth\{[^}]*queue="sample-stuck",state="ready"[^}]*\} 1/m);
    await new Admin(db.pool).cancel(stuck);
  });

  it('closes everything: no HTTP server, no connection of the app left', async () => {
    const closing = app;
    app = undefined;
    await closing?.close();
    await expect(fetch(`${url}/orders/6f1c0a52-3a4e-4c8e-9a57-2a0e7d1e9b11`)).rejects.toThrow();
    // A closed connection's backend goes away a moment after the client hangs up.
    await waitFor(async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1',
        [APPLICATION_NAME],
      );
      return rows[0].n === 0;
    }, 5_000, 'the app connections to close');
  });
});
