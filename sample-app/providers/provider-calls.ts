import { Injectable } from '@nestjs/common';
import { WorkhorseTransactionHost } from 'nestjs-workhorse';

/** One call that reached a provider. */
export interface ProviderCall {
  provider: string;
  operation: string;
  orderId: string;
  idempotencyKey: string;
  /** What the provider answered with: a charge id, a label id. */
  reference: string;
}

/**
 * The fake providers' side of the world: every call that really reaches one is a row in
 * `sample_provider_calls`, written at once on a pooled connection of its own, never inside the caller's
 * transaction. An external effect does not roll back, and a worker killed right after the call
 * must leave the row behind, as a real charge would be left on the card.
 */
@Injectable()
export class ProviderCalls {
  constructor(private readonly tx: WorkhorseTransactionHost) {}

  async record(call: ProviderCall): Promise<void> {
    await this.tx.pool.query(
      `INSERT INTO sample_provider_calls (provider, operation, order_id, idempotency_key, reference, pid)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [call.provider, call.operation, call.orderId, call.idempotencyKey, call.reference, process.pid],
    );
  }
}
