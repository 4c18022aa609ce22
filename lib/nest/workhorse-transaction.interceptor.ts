import { Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { WorkhorseTransactionHost } from './workhorse-transaction.host';

/**
 * Gives each HTTP request its own transaction: the route handler (and everything it calls)
 * runs inside it, `Queue.enqueue` and `Admin` calls with no client join it, and it commits
 * before the response is written, so a failed commit becomes an error response. A thrown error,
 * `HttpException`s included, rolls it back. The connection is taken at the first query only.
 *
 * Registered for the whole application by `requestTransactions: true`; or per controller or
 * route. Other context types (RPC, WebSocket, GraphQL) pass through untouched. Do not use it on
 * routes that stream (SSE) or write the response themselves (`@Res()`): it holds the response
 * until the commit.
 *
 * @example
 * @Controller('orders')
 * @UseInterceptors(WorkhorseTransactionInterceptor)
 * export class OrdersController {
 *   @Post()
 *   async create(@Body() order: CreateOrder): Promise<{ jobId: string }> {
 *     await this.orders.insert(order);
 *     return { jobId: await this.queue.enqueue('order.fulfill', { id: order.id }) };
 *   }
 * }
 */
@Injectable()
export class WorkhorseTransactionInterceptor implements NestInterceptor {
  constructor(private readonly host: WorkhorseTransactionHost) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    return this.host.observe(() => next.handle());
  }
}
