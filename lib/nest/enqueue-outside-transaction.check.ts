import { Logger } from '@nestjs/common';
import type { Queryable } from '../core/types';
import type { WorkhorseModuleOptions } from './workhorse-module-options.interface';
import { TransactionRequiredError } from './workhorse-transaction.error';
import { messages } from './workhorse.messages';

/** The most call sites remembered, each warned about once; past them, nothing more is said. */
const MAX_SITES = 1000;

type Caller = (...args: never[]) => unknown;

/**
 * What the injected `Queue` does about an enqueue outside any transaction (no client argument,
 * and neither the `transaction` option's scope nor the host reports one). From here that is
 * also what an enqueue inside a transaction the ORM opened itself (`dataSource.transaction(cb)`,
 * `prisma.$transaction(cb)`) looks like: it would commit on the pool, and stay when the ORM's
 * transaction rolls back. With `requireTransaction: true` such an enqueue is refused; in
 * development, with a `transaction` option and no request transactions, it is warned about,
 * once per call site (the first place outside this package on the stack).
 */
export class EnqueueOutsideTransactionCheck {
  private readonly logger = new Logger('Workhorse');
  private readonly warned = new Set<string>();

  private constructor(private readonly refuse: boolean) {}

  /**
   * The check the module's options ask for, or null when they ask for none (and an enqueue
   * then costs nothing more). `env` is `NODE_ENV`, read once when the module starts.
   */
  static of(options: WorkhorseModuleOptions, env = process.env.NODE_ENV): EnqueueOutsideTransactionCheck | null {
    if (options.requireTransaction === true) return new EnqueueOutsideTransactionCheck(true);
    if (options.transaction !== undefined && options.requestTransactions !== true && env !== 'production') {
      return new EnqueueOutsideTransactionCheck(false);
    }
    return null;
  }

  /**
   * Checks one call, synchronously at its start (so `caller`, the public method called, finds
   * the caller's frame on the stack), given where it runs: its client argument, else the host's
   * current transaction. Returns the error to reject the call with, or undefined.
   */
  check(method: 'enqueue' | 'enqueueDeduped' | 'enqueueMany', types: () => string, target: Queryable | undefined, caller: Caller): TransactionRequiredError | undefined {
    if (target !== undefined) return undefined;
    if (this.refuse) return new TransactionRequiredError(messages.enqueueOutsideTransaction(method, types()));
    if (this.warned.size >= MAX_SITES) return undefined;
    const site = callSite(caller);
    if (this.warned.has(site)) return undefined;
    this.warned.add(site);
    this.logger.warn(messages.enqueueOutsideScope(method, types(), site));
    return undefined;
  }
}

/** The frame that called `caller`, as V8 writes it (`OrdersService.place (/app/dist/orders.service.js:12:31)`). */
function callSite(caller: Caller): string {
  const holder: { stack?: string } = {};
  Error.captureStackTrace(holder, caller);
  const frame = holder.stack?.split('\n').find((line) => line.trimStart().startsWith('at '));
  return frame === undefined ? 'an unknown place' : frame.trim().slice('at '.length);
}
