import { randomBytes } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { ProviderCalls } from './provider-calls';

export interface LabelRequest {
  orderId: string;
  customer: string;
  item: string;
  /** Stable across retries of the same job, as for the payment provider. */
  idempotencyKey: string;
}

/** Stands in for a shipping-label API. Each call "prints a label": it is recorded and logged. */
@Injectable()
export class FakeLabelPrinter {
  private readonly logger = new Logger(FakeLabelPrinter.name);

  constructor(private readonly calls: ProviderCalls) {}

  async print(request: LabelRequest): Promise<{ labelId: string }> {
    const labelId = `lb_${randomBytes(6).toString('hex')}`;
    await this.calls.record({
      provider: 'labels',
      operation: 'label',
      orderId: request.orderId,
      idempotencyKey: request.idempotencyKey,
      reference: labelId,
    });
    this.logger.log(`Printed a label for ${request.item} to ${request.customer} (order ${request.orderId}): ${labelId}`);
    return { labelId };
  }
}
