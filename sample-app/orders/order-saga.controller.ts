import { BadRequestException, Body, Controller, Get, HttpCode, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import { DecisionNotAllowedError, WorkhorseValidationError, type HumanWait } from 'nestjs-workhorse';
import { parseRefundDecision, parseShipmentNotice } from './order-saga.validation';
import { OrderSagaService } from './order-saga.service';

/** The saga's HTTP side: the warehouse's webhook, refund decisions, and the refunds waiting for one. */
@Controller()
export class OrderSagaController {
  constructor(private readonly saga: OrderSagaService) {}

  /** `POST /orders/:id/shipped` with `{ "trackingId": "T-1", "missingLines": [1] }`: 200 with the signal's status. */
  @Post('orders/:id/shipped')
  @HttpCode(200)
  async shipped(@Param('id', ParseUUIDPipe) id: string, @Body() body: unknown): Promise<{ status: string }> {
    return this.saga.shipped(id, parseShipmentNotice(body));
  }

  /** `POST /orders/:id/refund-decision` with `{ "decision": "approve", "actor": "alice", "reason": "..." }`. */
  @Post('orders/:id/refund-decision')
  @HttpCode(200)
  async decide(@Param('id', ParseUUIDPipe) id: string, @Body() body: unknown): Promise<{ status: string }> {
    try {
      return await this.saga.decideRefund(id, parseRefundDecision(body));
    } catch (error) {
      // Not one of the wait's choices, or a field the queue refuses: the request is wrong.
      if (error instanceof DecisionNotAllowedError || error instanceof WorkhorseValidationError) {
        throw new BadRequestException([error.message]);
      }
      throw error;
    }
  }

  /** `GET /refund-approvals`: the large refunds waiting for a decision, with their context. */
  @Get('refund-approvals')
  async pending(@Query('cursor') cursor?: string): Promise<{ items: HumanWait[]; nextCursor: string | null }> {
    return this.saga.pendingRefunds(cursor);
  }
}
