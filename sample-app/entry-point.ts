import type { LoggerService } from '@nestjs/common';
import { DASHBOARD_PATH } from './app.module';
import type { WorkhorseWorkerOptions } from 'nestjs-workhorse';
import type { SampleConfig } from './sample-config';

/** The worker options of `main.ts` and `worker.ts`, from the environment. */
export function workerOptions(config: SampleConfig): WorkhorseWorkerOptions {
  return {
    concurrency: config.concurrency,
    ...(config.leaseMs !== undefined && { leaseMs: config.leaseMs }),
    ...(config.workerId !== undefined && { workerId: config.workerId }),
  };
}

/**
 * Runs an entry point's `main`. A start-up failure is logged and ends the process with exit
 * code 1; `main` has stopped what it started by then.
 */
export function runEntryPoint(main: () => Promise<void>, logger: () => LoggerService | undefined): void {
  main().catch((error: unknown) => {
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    const log = logger();
    if (log) log.error(`Start-up failed: ${text}`, undefined, 'Sample');
    else process.stderr.write(`Start-up failed: ${text}\n`);
    process.exit(1);
  });
}

/**
 * Tells what an HTTP process serves besides the orders: the health check, the metrics, the
 * dashboard and how to become its operator.
 */
export function logEndpoints(logger: LoggerService, url: string, config: SampleConfig): void {
  logger.log(`Health: GET ${url}/health (Terminus over admin.health: 503 once the queue is critical; a readiness check, not liveness)`, 'Sample');
  logger.log(`Metrics: GET ${url}/metrics (Prometheus text; the queue depth of every queue)`, 'Sample');
  logger.log(`Dashboard: ${url}${DASHBOARD_PATH}/ (read-only; job data hidden)`, 'Sample');
  logger.log(`As operator (job data, redrive, pause): open ${url}/operator?token=${config.operatorToken} once in the browser`, 'Sample');
}
