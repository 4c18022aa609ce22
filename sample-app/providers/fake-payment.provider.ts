import { randomBytes } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { ProviderCalls } from './provider-calls';

export interface ChargeRequest {
  orderId: string;
  customer: string;
  amountCents: number;
  /**
   * A real payment API deduplicates on it; pass one that is stable across retries of the same
   * job. Checkpoints narrow the window in which a charge can repeat; only the provider closes it.
   */
  idempotencyKey: string;
}

/** Stands in for a payment API. Each call "charges the card": it is recorded and logged. */
@Injectable()
export class FakePaymentProvider {
  private readonly logger = new Logger(FakePaymentProvider.name);

  constructor(private readonly calls: ProviderCalls) {}

  async charge(request: ChargeRequest): Promise<{ chargeId: string }> {
    const chargeId = `ch_${randomBytes(6).toString('hex')}`;
    await this.calls.record({
      provider: 'payments',
      operation: 'charge',
      orderId: request.orderId,
      idempotencyKey: request.idempotencyKey,
      reference: chargeId,
    });
    const amount = (request.amountCents / 100).toFixed(2);
    this.logger.log(`Charged ${amount} to ${request.customer} for order ${request.orderId}: ${chargeId}`);
    return { chargeId };
  }

  /** "Refunds" part of a charge: recorded and logged like a charge. */
  async refund(request: { orderId: string; chargeId: string; amountCents: number; idempotencyKey: string }): Promise<{ refundId: string }> {
    const refundId = `re_${randomBytes(6).toString('hex')}`;
    await this.calls.record({
      provider: 'payments',
      operation: 'refund',
      orderId: request.orderId,
      idempotencyKey: request.idempotencyKey,
      reference: refundId,
    });
    this.logger.log(`Refunded ${(request.amountCents / 100).toFixed(2)} of ${request.chargeId} for order ${request.orderId}: ${refundId}`);
    return { refundId };
  }
}
