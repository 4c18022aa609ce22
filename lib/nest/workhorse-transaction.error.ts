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
