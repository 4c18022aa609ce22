/** The job type that fulfils an order, and the queue it lives in. */
export const ORDER_FULFILL = 'order.fulfill';
export const ORDERS_QUEUE = 'orders';
/** The job type of an order placed with lines: charge, wait for shipment, refund what is missing. */
export const ORDER_SAGA = 'order.saga';
/** A child job of the saga, one per order line: the line's receipt. */
export const ORDER_LINE_RECEIPT = 'order.line-receipt';
/** The signal the warehouse sends (`POST /orders/:id/shipped`) and the saga waits for. */
export const SHIPPED_SIGNAL = 'shipped';
/** The human wait of a large refund (`POST /orders/:id/refund-decision`, `workhorse waits complete`). */
export const REFUND_APPROVAL = 'approve-refund';
/** A refund of this much (100.00) or more needs a person's approval. */
export const LARGE_REFUND_CENTS = 10_000;

/** Injection token of {@link OrdersModuleOptions}. */
export const ORDERS_MODULE_OPTIONS = Symbol('ORDERS_MODULE_OPTIONS');

export interface OrdersModuleOptions {
  /**
   * The label stage waits this long before printing. Only for the demo, which kills the worker
   * during the wait: after the card was charged and before the label was printed.
   */
  labelDelayMs: number;
}
