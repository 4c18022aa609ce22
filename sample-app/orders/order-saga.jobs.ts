import { Injectable, Logger } from '@nestjs/common';
import { JobHandler, NonRetryableError, type HandlerContext } from 'nestjs-workhorse';
import { FakePaymentProvider } from '../providers/fake-payment.provider';
import { LARGE_REFUND_CENTS, ORDER_LINE_RECEIPT, ORDER_SAGA, ORDERS_QUEUE, REFUND_APPROVAL, SHIPPED_SIGNAL } from './orders.constants';
import { OrdersService } from './orders.service';
import type { FulfillOrderPayload, LineReceiptPayload, SagaResult, ShipmentNotice } from './order.types';

/**
 * The saga of an order placed with lines, as ordinary code:
 *
 * 1. charge the card (a checkpoint);
 * 2. wait for the warehouse's `shipped` signal (`POST /orders/:id/shipped`): the job parks,
 *    `blocked`, holding no worker slot, for as long as shipping takes;
 * 3. refund the lines the warehouse could not ship; a large refund first waits for a person's
 *    decision (`POST /orders/:id/refund-decision` or `workhorse waits complete`);
 * 4. issue one receipt per order line, each a child job (`ctx.runChildren`): the saga parks
 *    until every receipt has ended.
 *
 * Each wait ends this run of the handler; when it is answered the handler runs again from the
 * top, the charge replays from its checkpoint (the card is charged once) and the answered waits
 * return their answers at once.
 */
@Injectable()
export class OrderSagaJobs {
  private readonly logger = new Logger(OrderSagaJobs.name);

  constructor(
    private readonly orders: OrdersService,
    private readonly payments: FakePaymentProvider,
  ) {}

  @JobHandler(ORDER_SAGA, { queue: ORDERS_QUEUE })
  async run(payload: FulfillOrderPayload, ctx: HandlerContext): Promise<SagaResult> {
    const order = await this.orders.find(payload.orderId);
    if (order === null || order.lines === null) throw new NonRetryableError(`order ${payload.orderId} does not exist or has no lines`);
    const lines = order.lines;

    const { chargeId } = await ctx.checkpoint('charge', () =>
      this.payments.charge({
        orderId: order.id,
        customer: order.customer,
        amountCents: order.amountCents,
        idempotencyKey: `order:${order.id}:charge`,
      }),
    );

    const shipment = await ctx.waitForSignal<ShipmentNotice>(SHIPPED_SIGNAL);
    this.logger.log(`Order ${order.id} shipped: ${shipment.trackingId}`);
    const missing = shipment.missingLines.filter((i) => i >= 0 && i < lines.length);
    const cents = missing.reduce((total, i) => total + lines[i].amountCents, 0);
    const refund = cents === 0 ? null : await this.refund(ctx, order, chargeId, cents, missing.map((i) => lines[i].item));
    const receipts = await ctx.runChildren(
      'line-receipts',
      lines.map((line, i) => ({ type: ORDER_LINE_RECEIPT, payload: { orderId: order.id, line: i, item: line.item }, options: { queue: ORDERS_QUEUE } })),
    );
    return { chargeId, trackingId: shipment.trackingId, lineReceipts: receipts.filter((r) => r.state === 'succeeded').length, refund };
  }

  /** One order line's receipt: a child job of the order's saga. */
  @JobHandler(ORDER_LINE_RECEIPT, { queue: ORDERS_QUEUE })
  async lineReceipt(payload: LineReceiptPayload): Promise<{ receipt: string }> {
    return { receipt: `rc-${payload.orderId}-${payload.line}` };
  }

  /** Refunds the missing lines; a large refund first waits for a person's decision. */
  private async refund(
    ctx: HandlerContext,
    order: { id: string; customer: string },
    chargeId: string,
    cents: number,
    missingItems: string[],
  ): Promise<SagaResult['refund']> {
    let decidedBy: string | null = null;
    let approved = true;
    if (cents >= LARGE_REFUND_CENTS) {
      const decided = await ctx.waitForHuman<'approve' | 'reject'>(REFUND_APPROVAL, {
        context: { orderId: order.id, customer: order.customer, refundCents: cents, missingItems },
        choices: ['approve', 'reject'],
      });
      decidedBy = decided.actor;
      approved = decided.decision === 'approve';
    }
    const refundId = approved
      ? (
          await ctx.checkpoint('refund', () =>
            this.payments.refund({ orderId: order.id, chargeId, amountCents: cents, idempotencyKey: `order:${order.id}:refund` }),
          )
        ).refundId
      : null;
    return { cents, decidedBy, approved, refundId };
  }
}
