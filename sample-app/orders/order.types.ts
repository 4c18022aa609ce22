/** An order as the API shows it. */
export interface Order {
  id: string;
  customer: string;
  item: string;
  amountCents: number;
  /** The order's lines, for an order placed with lines (its saga); null for a one-item order. */
  lines: OrderLine[] | null;
  /** The job enqueued with the order: `order.fulfill`, or `order.saga` for an order with lines. */
  jobId: string;
  createdAt: Date;
}

/** One line of an order placed with lines. */
export interface OrderLine {
  item: string;
  amountCents: number;
}

/** The payload of an order line's receipt, a child job of the order's saga. */
export interface LineReceiptPayload {
  orderId: string;
  line: number;
  item: string;
}

/** What a client sends to `POST /orders`, once validated. */
export interface NewOrder {
  customer: string;
  item: string;
  amountCents: number;
  /** Given for an order with lines: `item` and `amountCents` are then their summary and total. */
  lines?: OrderLine[];
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

/** What the warehouse sends to `POST /orders/:id/shipped`, once validated: the `shipped` signal's payload. */
export interface ShipmentNotice {
  trackingId: string;
  /** Positions (from 0) of the order lines the warehouse could not ship: they are refunded. */
  missingLines: number[];
}

/** The result an `order.saga` job stores when it succeeds. */
export interface SagaResult {
  chargeId: string;
  trackingId: string;
  /** The lines whose receipt (a child job each) was issued. */
  lineReceipts: number;
  /** Null when every line shipped. */
  refund: {
    cents: number;
    /** Who approved or rejected a large refund; null for a small one (no approval needed). */
    decidedBy: string | null;
    approved: boolean;
    refundId: string | null;
  } | null;
}
