import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { WorkhorseHealthIndicator } from 'nestjs-workhorse/terminus';
import { OperationsController } from './operations.controller';
import { SampleMetrics } from './sample-metrics.service';

/** Health (`@nestjs/terminus`) and metrics (OpenTelemetry, exported for Prometheus). */
@Module({
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [OperationsController],
  providers: [SampleMetrics, WorkhorseHealthIndicator],
})
export class OperationsModule {}
