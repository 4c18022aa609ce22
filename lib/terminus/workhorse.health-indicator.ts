import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { Admin } from '../core/admin';
import type { HealthReport, HealthStatus, HealthThresholds } from '../core/operator/health';

/** Options of {@link WorkhorseHealthIndicator.isHealthy}. */
export interface WorkhorseHealthCheckOptions {
  /** Thresholds of `admin.health()`; those left out keep their defaults. */
  thresholds?: HealthThresholds;
  /** The level at which the indicator reports `down` (default `critical`: a `warn` stays `up`). */
  downAt?: Exclude<HealthStatus, 'ok'>;
}

/**
 * A `@nestjs/terminus` health indicator over `admin.health()`: `up` below the `downAt` level,
 * `down` at it (Terminus then answers 503), with the status, the reasons and the per-queue
 * numbers as its details. Needs `@nestjs/terminus` 11 or 12 and `WorkhorseModule` imported.
 *
 * @example
 * // providers: [WorkhorseHealthIndicator], imports: [TerminusModule, WorkhorseModule.forRoot(...)]
 * @Get('health') @HealthCheck()
 * check() {
 *   return this.health.check([() => this.workhorse.isHealthy('queue', { downAt: 'critical' })]);
 * }
 */
@Injectable()
export class WorkhorseHealthIndicator {
  constructor(
    private readonly admin: Admin,
    private readonly indicators: HealthIndicatorService,
  ) {}

  async isHealthy<const Key extends string>(key: Key, options: WorkhorseHealthCheckOptions = {}): Promise<HealthIndicatorResult<Key>> {
    const session = this.indicators.check(key);
    let report: HealthReport;
    try {
      report = await this.admin.health(options.thresholds ?? {});
    } catch (error) {
      return session.down({ message: (error as Error).message });
    }
    const details = { level: report.status, reasons: report.reasons, queues: report.queues, workers: report.workers };
    const down = report.status === 'critical' || (report.status === 'warn' && options.downAt === 'warn');
    return down ? session.down(details) : session.up(details);
  }
}
