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

/** Tells where the dashboard is, and how to become its operator. */
export function logDashboard(logger: LoggerService, url: string, config: SampleConfig): void {
  logger.log(`Dashboard: ${url}${DASHBOARD_PATH}/ (read-only; job data hidden)`, 'Sample');
  logger.log(`As operator (job data, redrive, pause): open ${url}/operator?token=${config.operatorToken} once in the browser`, 'Sample');
}
