import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { JobHandler, NonRetryableError, type HandlerContext } from 'nestjs-workhorse';
import { FakeLabelPrinter } from '../providers/fake-label.printer';
import { FakePaymentProvider } from '../providers/fake-payment.provider';
import { ORDER_FULFILL, ORDERS_MODULE_OPTIONS, ORDERS_QUEUE, type OrdersModuleOptions } from './orders.constants';
import { OrdersService } from './orders.service';
import type { FulfillmentResult, FulfillOrderPayload } from './order.types';

/**
 * Fulfils an order in two checkpointed stages: charge the card, then print the shipping label.
 *
 * Delivery is at least once: if the worker dies mid-job, another worker runs the handler again
 * from the top. Each completed stage is a checkpoint, so the second run gets the stored charge
 * back instead of charging again, and carries on with the label. The idempotency keys would let
 * a real provider close the last gap: a crash after the provider answered and before the
 * checkpoint was saved.
 *
 * The handler is registered in every process of the app, the web-only API included: there it
 * never runs, but it tells the API's `Queue` which queue `order.fulfill` jobs belong to.
 */
@Injectable()
export class OrdersJobs {
  private readonly logger = new Logger(OrdersJobs.name);

  constructor(
    private readonly orders: OrdersService,
    private readonly payments: FakePaymentProvider,
    private readonly labels: FakeLabelPrinter,
    @Inject(ORDERS_MODULE_OPTIONS) private readonly options: OrdersModuleOptions,
  ) {}

  @JobHandler(ORDER_FULFILL, { queue: ORDERS_QUEUE })
  async fulfill(payload: FulfillOrderPayload, ctx: HandlerContext): Promise<FulfillmentResult> {
    const order = await this.orders.find(payload.orderId);
    // Retrying cannot make a missing order appear.
    if (order === null) throw new NonRetryableError(`order ${payload.orderId} does not exist`);

    let charged = false;
    const { chargeId } = await ctx.checkpoint('charge', () => {
      charged = true;
      return this.payments.charge({
        orderId: order.id,
        customer: order.customer,
        amountCents: order.amountCents,
        idempotencyKey: `order:${order.id}:charge`,
      });
    });
    if (!charged) this.logger.log(`Order ${order.id}: "charge" replayed from its checkpoint (${chargeId}); the card is not charged again`);

    const { labelId } = await ctx.checkpoint('label', async () => {
      if (this.options.labelDelayMs > 0) {
        this.logger.log(`Order ${order.id}: waiting ${this.options.labelDelayMs} ms before printing the label (SAMPLE_LABEL_DELAY_MS)`);
        // Aborted when the worker shuts down or loses the lease: the job is then left to recovery.
        await sleep(this.options.labelDelayMs, undefined, { signal: ctx.signal });
      }
      return this.labels.print({
        orderId: order.id,
        customer: order.customer,
        item: order.item,
        idempotencyKey: `order:${order.id}:label`,
      });
    });

    return { chargeId, labelId };
  }
}
