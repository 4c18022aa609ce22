import { Controller, Get, Req, Res } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { WorkhorseHealthIndicator } from 'nestjs-workhorse/terminus';
import { SampleMetrics } from './sample-metrics.service';

/**
 * What the on-call engineer's tools read: `GET /health` (Terminus: 200 while the queue is ok or
 * warns, 503 with the reasons once it is critical) and `GET /metrics` (Prometheus).
 */
@Controller()
export class OperationsController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly workhorse: WorkhorseHealthIndicator,
    private readonly metrics: SampleMetrics,
  ) {}

  @Get('health')
  @HealthCheck()
  check() {
    return this.health.check([() => this.workhorse.isHealthy('queue')]);
  }

  @Get('metrics')
  scrape(@Req() request: IncomingMessage, @Res() response: ServerResponse): void {
    this.metrics.scrape(request, response);
  }
}
