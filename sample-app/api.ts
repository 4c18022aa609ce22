/**
 * The HTTP API alone: it stores orders and enqueues their jobs, and runs no worker (the module
 * gets no `worker` option), so running more replicas of it adds web capacity and nothing else.
 * Jobs run in `worker.ts` processes. `npm run start:api`.
 */
import type { ConsoleLogger, INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';
import { openSampleDatabase } from './database/sample-database';
import { logEndpoints, runEntryPoint } from './entry-point';
import { readSampleConfig } from './sample-config';
import { createSampleLogger } from './sample-logger';

let logger: ConsoleLogger | undefined;

async function main(): Promise<void> {
  const config = readSampleConfig();
  logger = createSampleLogger('api', config);
  const database = await openSampleDatabase(config, logger);
  let app: INestApplication | undefined;
  try {
    app = await NestFactory.create(
      AppModule.register({
        databaseUrl: database.url,
        applicationName: 'sample-api',
        worker: false,
        dashboard: { operatorToken: config.operatorToken },
        queueDepth: 'all',
      }),
      { logger, abortOnError: false },
    );
    app.enableShutdownHooks();
    await app.listen(config.httpPort, config.httpHost);
    const url = await app.getUrl();
    logger.log(`Listening on ${url}; no worker in this process (run npm run start:worker)`, 'Sample');
    logEndpoints(logger, url, config);
  } catch (error) {
    // Closing first lets a worker that already started drain while the database is still there.
    await app?.close().catch(() => undefined);
    await database.stop();
    throw error;
  }
}

runEntryPoint(main, () => logger);
