/**
 * A worker alone: no HTTP server, just the application context with the `order.fulfill` handler
 * and a worker that claims from the `orders` queue. Scale jobs by running more of these, on this
 * host or others, against the same PostgreSQL. `npm run start:worker`.
 *
 * SIGTERM or SIGINT drains it: it stops claiming, lets running handlers finish (up to the
 * worker's shutdownTimeoutMs), closes its connections and exits. A job it could not finish runs
 * again, on any worker, once its lease has expired.
 */
import type { ConsoleLogger, INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';
import { openSampleDatabase } from './database/sample-database';
import { runEntryPoint, workerOptions } from './entry-point';
import { readSampleConfig } from './sample-config';
import { createSampleLogger } from './sample-logger';

let logger: ConsoleLogger | undefined;

async function main(): Promise<void> {
  const config = readSampleConfig();
  logger = createSampleLogger('worker', config);
  const database = await openSampleDatabase(config, logger);
  let app: INestApplicationContext | undefined;
  try {
    app = await NestFactory.createApplicationContext(
      AppModule.register({
        databaseUrl: database.url,
        applicationName: 'sample-worker',
        worker: workerOptions(config),
        labelDelayMs: config.labelDelayMs,
        dashboard: false,
        // No HTTP server, so no GET /metrics to read a gauge from.
        queueDepth: false,
      }),
      { logger, abortOnError: false },
    );
    app.enableShutdownHooks();
    logger.log(`Worker running (pid ${process.pid}); SIGTERM or Ctrl+C drains it`, 'Sample');
  } catch (error) {
    // Closing first lets a worker that already started drain while the database is still there.
    await app?.close().catch(() => undefined);
    await database.stop();
    throw error;
  }
}

runEntryPoint(main, () => logger);
