import { Body, Controller, Get, NotFoundException, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { parseNewOrder } from './new-order.validation';
import { OrdersService, type OrderDetails } from './orders.service';

@Controller('orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  /**
   * `POST /orders` with `{ "customer": "Ada Lovelace", "item": "Loom cards", "amountCents": 4200 }`:
   * 201 with `{ orderId, jobId }`. A body that fails validation gets a 400 naming each bad field,
   * and nothing is written.
   */
  @Post()
  async create(@Body() body: unknown): Promise<{ orderId: string; jobId: string }> {
    return this.orders.place(parseNewOrder(body));
  }

  /** `GET /orders/:id`: the order, its job's snapshot and its timeline; 404 for an unknown order. */
  @Get(':id')
  async show(@Param('id', ParseUUIDPipe) id: string): Promise<OrderDetails> {
    const details = await this.orders.details(id);
    if (details === null) throw new NotFoundException(`order ${id} not found`);
    return details;
  }
}
