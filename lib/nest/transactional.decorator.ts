import { TRANSACTION_HOST, TRANSACTIONAL_METADATA } from './workhorse.constants';
import { WorkhorseConfigurationError } from './workhorse-configuration.error';
import { activeTransactionHost, type WorkhorseTransactionHost } from './workhorse-transaction.host';
import { messages } from './workhorse.messages';

type AnyMethod = (this: unknown, ...args: unknown[]) => unknown;

function hostOf(instance: unknown): WorkhorseTransactionHost | undefined {
  if (typeof instance !== 'object' || instance === null) return undefined;
  return (instance as { [TRANSACTION_HOST]?: WorkhorseTransactionHost })[TRANSACTION_HOST];
}

/**
 * Runs the method in a database transaction of `WorkhorseTransactionHost`: it commits when the
 * method resolves and rolls back when it throws (any error, `HttpException`s included). A call
 * made inside a transaction joins it, so nested `@Transactional()` methods share one. Inside,
 * `Queue.enqueue`, `Admin` calls and `WorkhorseTransactionHost.query` use the transaction. Works
 * on providers and controllers alike; the decorated method always returns a promise.
 *
 * The wrapper is installed when the class is declared (Nest keeps references to controller
 * methods from before the application starts) and finds its host at call time, through a hidden
 * property WorkhorseModule sets on every singleton that has such methods.
 *
 * @example
 * @Injectable()
 * export class OrderService {
 *   constructor(private readonly tx: WorkhorseTransactionHost, private readonly queue: Queue) {}
 *
 *   @Transactional()
 *   async placeOrder(id: string): Promise<void> {
 *     await this.tx.query('INSERT INTO orders (id) VALUES ($1)', [id]);
 *     await this.queue.enqueue('order.fulfill', { id });
 *   }
 * }
 */
export function Transactional(): MethodDecorator {
  return (target, key, descriptor) => {
    const original = descriptor.value as unknown;
    const name = `${(target as { constructor: { name: string } }).constructor.name}.${String(key)}`;
    if (typeof original !== 'function') throw new WorkhorseConfigurationError(messages.notAMethod('Transactional', name));
    const method = original as AnyMethod;
    const wrapper = function (this: unknown, ...args: unknown[]): Promise<unknown> {
      const host = hostOf(this) ?? activeTransactionHost();
      if (!host) return Promise.reject(new WorkhorseConfigurationError(messages.transactionalWithoutHost(name)));
      return host.run(() => method.apply(this, args));
    };
    Object.defineProperty(wrapper, 'name', { value: method.name });
    // Decorators applied before this one (e.g. @Post() written below) put their metadata on the original.
    for (const metadataKey of Reflect.getOwnMetadataKeys(method)) {
      Reflect.defineMetadata(metadataKey, Reflect.getOwnMetadata(metadataKey, method), wrapper);
    }
    Reflect.defineMetadata(TRANSACTIONAL_METADATA, true, wrapper);
    descriptor.value = wrapper as typeof descriptor.value;
    return descriptor;
  };
}
