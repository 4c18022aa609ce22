import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { Admin, Queue, Transactional, WorkhorseTransactionHost, type JobSnapshot, type TimelineEntry } from 'nestjs-workhorse';
import { ORDER_FULFILL, ORDER_SAGA } from './orders.constants';
import type { FulfillOrderPayload, NewOrder, Order, OrderLine } from './order.types';

/** An order with its fulfilment job as the queue sees it: `GET /orders/:id`. */
export interface OrderDetails {
  order: Order;
  /** The job's snapshot (`Admin.getJob`): state, attempts, result or error. */
  job: JobSnapshot | null;
  /** The job's history (`Admin.getJobTimeline`), oldest first. */
  timeline: TimelineEntry[];
}

interface OrderRow {
  id: string;
  customer: string;
  item: string;
  amount_cents: number;
  lines: OrderLine[] | null;
  job_id: string;
  created_at: Date;
}

const TIMELINE_PAGE = 200;
/** An order's job has a dozen entries; this bounds a pathological one. */
const TIMELINE_MAX = 1000;

@Injectable()
export class OrdersService {
  constructor(
    private readonly tx: WorkhorseTransactionHost,
    private readonly queue: Queue,
    private readonly admin: Admin,
  ) {}

  /**
   * Stores the order and enqueues its fulfilment in one transaction: `@Transactional()` opens it,
   * and `queue.enqueue` and `tx.query` join it. Both commit, or neither does: no order without
   * its job, no job for an order that was rolled back. The job goes to the `orders` queue, which
   * `OrdersJobs` declares for the type. An order with lines gets the `order.saga` job instead
   * (`OrderSagaJobs`).
   */
  @Transactional()
  async place(order: NewOrder): Promise<{ orderId: string; jobId: string }> {
    const orderId = randomUUID();
    const jobId = await this.queue.enqueue<FulfillOrderPayload>(order.lines ? ORDER_SAGA : ORDER_FULFILL, { orderId });
    await this.tx.query(
      'INSERT INTO sample_orders (id, customer, item, amount_cents, lines, job_id) VALUES ($1, $2, $3, $4, $5, $6)',
      [orderId, order.customer, order.item, order.amountCents, order.lines ? JSON.stringify(order.lines) : null, jobId],
    );
    return { orderId, jobId };
  }

  async find(orderId: string): Promise<Order | null> {
    const { rows } = await this.tx.query<OrderRow>(
      'SELECT id, customer, item, amount_cents, lines, job_id, created_at FROM sample_orders WHERE id = $1',
      [orderId],
    );
    const row = rows[0];
    if (row === undefined) return null;
    return {
      id: row.id,
      customer: row.customer,
      item: row.item,
      amountCents: row.amount_cents,
      lines: row.lines,
      jobId: row.job_id,
      createdAt: row.created_at,
    };
  }

  async details(orderId: string): Promise<OrderDetails | null> {
    const order = await this.find(orderId);
    if (order === null) return null;
    const job = await this.admin.getJob(order.jobId);
    const timeline: TimelineEntry[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.admin.getJobTimeline(order.jobId, { limit: TIMELINE_PAGE, cursor });
      timeline.push(...page.items);
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined && timeline.length < TIMELINE_MAX);
    return { order, job, timeline };
  }
}
