/** An order as the API shows it. */
export interface Order {
  id: string;
  customer: string;
  item: string;
  amountCents: number;
  /** The `order.fulfill` job enqueued with the order. */
  jobId: string;
  createdAt: Date;
}

/** What a client sends to `POST /orders`, once validated. */
export interface NewOrder {
  customer: string;
  item: string;
  amountCents: number;
}

/**
 * The payload of an `order.fulfill` job: the order's id only. The handler reads the order
 * itself, so the job never carries a stale copy of it.
 */
export interface FulfillOrderPayload {
  orderId: string;
}

/** The result an `order.fulfill` job stores when it succeeds. */
export interface FulfillmentResult {
  chargeId: string;
  labelId: string;
}
