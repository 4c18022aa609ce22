import { Injectable, type OnModuleInit } from '@nestjs/common';
import { WorkhorseTransactionHost } from 'nestjs-workhorse';

/**
 * The sample's own tables. A real application would create them with its migrations; the sample
 * creates them at start-up, if absent, so that it runs on an empty database.
 *
 * - `sample_orders`: one row per order, with the job that was enqueued with it (`order.fulfill`, or
 *   `order.saga` for an order with `lines`) and, once the warehouse reported it, its tracking id.
 * - `sample_provider_calls`: one row per call that really reached a (fake) provider, so tests and the
 *   demo can count the charges across processes, including one that was killed.
 *
 * Prefixed `sample_`: the README's Quickstart creates a table `orders` of its own, and both may
 * run on one database (the embedded one, say), where an `orders` table of another shape would
 * make every order of the sample fail.
 */
const CREATE_TABLES = `
  CREATE TABLE IF NOT EXISTS sample_orders (
    id           uuid PRIMARY KEY,
    customer     text NOT NULL,
    item         text NOT NULL,
    amount_cents integer NOT NULL CHECK (amount_cents > 0),
    job_id       uuid NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now()
  );
  CREATE TABLE IF NOT EXISTS sample_provider_calls (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider        text NOT NULL,
    operation       text NOT NULL,
    order_id        uuid NOT NULL,
    idempotency_key text NOT NULL,
    reference       text NOT NULL,
    pid             integer NOT NULL,
    called_at       timestamptz NOT NULL DEFAULT now()
  );
  CREATE INDEX IF NOT EXISTS sample_provider_calls_order_id ON sample_provider_calls (order_id);
  ALTER TABLE sample_orders ADD COLUMN IF NOT EXISTS lines jsonb;
  ALTER TABLE sample_orders ADD COLUMN IF NOT EXISTS tracking_id text;
`;

@Injectable()
export class OrdersTables implements OnModuleInit {
  constructor(private readonly tx: WorkhorseTransactionHost) {}

  /**
   * Runs before the worker starts (on bootstrap) and before the HTTP server listens. The lock
   * serialises API and worker processes that start at the same moment: two concurrent
   * `CREATE TABLE IF NOT EXISTS` can still collide on PostgreSQL's catalog.
   */
  async onModuleInit(): Promise<void> {
    await this.tx.run(async () => {
      await this.tx.query("SELECT pg_advisory_xact_lock(hashtext('nestjs-workhorse sample-app tables'))");
      await this.tx.query(CREATE_TABLES);
    });
  }
}
