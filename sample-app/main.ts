/**
 * The sample app in one process: the HTTP API and a worker side by side. The easiest way to
 * develop (`npm start`); in production run `api.ts` and `worker.ts` as separate processes.
 *
 * Without DATABASE_URL it starts the embedded PostgreSQL in sample-app/.pgdata and stops it
 * again when this process ends.
 */
import type { ConsoleLogger, INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';
import { openSampleDatabase } from './database/sample-database';
import { logEndpoints, runEntryPoint, workerOptions } from './entry-point';
import { readSampleConfig } from './sample-config';
import { createSampleLogger } from './sample-logger';

let logger: ConsoleLogger | undefined;

async function main(): Promise<void> {
  const config = readSampleConfig();
  logger = createSampleLogger('app', config);
  const database = await openSampleDatabase(config, logger);
  let app: INestApplication | undefined;
  try {
    app = await NestFactory.create(
      AppModule.register({
        databaseUrl: database.url,
        applicationName: 'sample-app',
        worker: workerOptions(config),
        labelDelayMs: config.labelDelayMs,
        dashboard: { operatorToken: config.operatorToken },
        queueDepth: 'all',
      }),
      { logger, abortOnError: false },
    );
    // SIGINT/SIGTERM: stop claiming, let running jobs finish, close the pool, then exit.
    app.enableShutdownHooks();
    await app.listen(config.httpPort, config.httpHost);
    const url = await app.getUrl();
    logger.log(`Listening on ${url} with a worker in this process`, 'Sample');
    logEndpoints(logger, url, config);
    logger.log(
      `Try: curl -s -X POST ${url}/orders -H 'content-type: application/json' ` +
        `-d '{"customer":"Ada Lovelace","item":"Loom cards","amountCents":4200}'`,
      'Sample',
    );
  } catch (error) {
    // Closing first lets a worker that already started drain while the database is still there.
    await app?.close().catch(() => undefined);
    await database.stop();
    throw error;
  }
}

runEntryPoint(main, () => logger);
