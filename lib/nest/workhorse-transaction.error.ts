import { WorkhorseError } from '../core/errors';

/**
 * A transaction of the {@link WorkhorseTransactionHost} could not be used or did not commit:
 * a query after the transaction ended (for example an un-awaited `enqueue`), a `COMMIT` that
 * PostgreSQL turned into a rollback because a statement inside the transaction had failed, or a
 * query or `COMMIT` after the transaction's connection was lost (its backend terminated).
 *
 * @example
 * try {
 *   await txHost.run(() => createOrder(order));
 * } catch (error) {
 *   if (error instanceof WorkhorseTransactionError) logger.warn(error.message);
 * }
 */
export class WorkhorseTransactionError extends WorkhorseError {}

/**
 * An enqueue of the injected `Queue` ran outside any transaction while `WorkhorseModule` has
 * `requireTransaction: true`: nothing was written. The message says how to give the enqueue its
 * transaction, or to pass the pool to enqueue on its own on purpose.
 *
 * @example
 * await expect(queue.enqueue('order.fulfill', { orderId })).rejects.toBeInstanceOf(TransactionRequiredError);
 */
export class TransactionRequiredError extends WorkhorseTransactionError {}
