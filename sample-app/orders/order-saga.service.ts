import { ConflictException, Injectable, NotFoundException } from '@nestjs/common';
import {
  Admin,
  Queue,
  Transactional,
  WorkhorseTransactionHost,
  type CompleteHumanWaitStatus,
  type HumanWait,
  type SendSignalStatus,
} from 'nestjs-workhorse';
import { ORDERS_QUEUE, REFUND_APPROVAL, SHIPPED_SIGNAL } from './orders.constants';
import { OrdersService } from './orders.service';
import type { Order, ShipmentNotice } from './order.types';

/**
 * What the outside world tells a running order saga: the warehouse's shipment (a signal) and a
 * person's decision on a large refund. Each call is one request transaction: the order's own
 * row and the signal or decision commit together, or not at all.
 */
@Injectable()
export class OrderSagaService {
  constructor(
    private readonly tx: WorkhorseTransactionHost,
    private readonly orders: OrdersService,
    private readonly queue: Queue,
    private readonly admin: Admin,
  ) {}

  /**
   * Stores the tracking id and signals the saga, in one transaction. Repeats of one shipment
   * (same tracking id) are answered `duplicate`: the warehouse may retry its webhook freely.
   */
  @Transactional()
  async shipped(orderId: string, notice: ShipmentNotice): Promise<{ status: SendSignalStatus }> {
    const order = await this.sagaOrder(orderId);
    await this.tx.query('UPDATE sample_orders SET tracking_id = $2 WHERE id = $1', [order.id, notice.trackingId]);
    const status = await this.queue.sendSignal(order.jobId, SHIPPED_SIGNAL, notice, { idempotencyKey: `shipped:${notice.trackingId}` });
    if (status === 'finished') throw new ConflictException(`order ${orderId} is complete; its saga takes no more signals`);
    return { status };
  }

  /** Records the decision on the order's large refund and resumes its saga. */
  @Transactional()
  async decideRefund(orderId: string, body: { decision: string; actor: string; reason?: string }): Promise<{ status: CompleteHumanWaitStatus }> {
    const order = await this.sagaOrder(orderId);
    const { decision, ...who } = body;
    const status = await this.queue.completeHumanWait(order.jobId, REFUND_APPROVAL, decision, who);
    if (status !== 'completed' && status !== 'duplicate') {
      throw new ConflictException(`order ${orderId} has no refund waiting for a decision (${status})`);
    }
    return { status };
  }

  /** The large refunds waiting for a decision, oldest first. */
  async pendingRefunds(cursor?: string): Promise<{ items: HumanWait[]; nextCursor: string | null }> {
    return this.admin.listHumanWaits({ queue: ORDERS_QUEUE, name: REFUND_APPROVAL, cursor });
  }

  private async sagaOrder(orderId: string): Promise<Order> {
    const order = await this.orders.find(orderId);
    if (order === null) throw new NotFoundException(`order ${orderId} not found`);
    if (order.lines === null) throw new ConflictException(`order ${orderId} has no lines: it runs no saga`);
    return order;
  }
}
