/** The job type that fulfils an order, and the queue it lives in. */
export const ORDER_FULFILL = 'order.fulfill';
export const ORDERS_QUEUE = 'orders';

/** Injection token of {@link OrdersModuleOptions}. */
export const ORDERS_MODULE_OPTIONS = Symbol('ORDERS_MODULE_OPTIONS');

export interface OrdersModuleOptions {
  /**
   * The label stage waits this long before printing. Only for the demo, which kills the worker
   * during the wait: after the card was charged and before the label was printed.
   */
  labelDelayMs: number;
}
