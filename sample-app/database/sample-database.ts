/**
 * The database every sample entry point runs on: `DATABASE_URL` when it is set, otherwise the
 * embedded PostgreSQL in `sample-app/.pgdata`, started on demand, so that a newcomer needs no
 * PostgreSQL of their own.
 */
import { relative } from 'node:path';
import type { LoggerService } from '@nestjs/common';
import type { SampleConfig } from '../sample-config';
import { startEmbeddedPostgres } from './embedded-postgres';
import { EMBEDDED_DATA_DIR } from './embedded-postgres.protocol';

export interface SampleDatabase {
  url: string;
  /** True for the embedded server (whether this process started it or another did). */
  embedded: boolean;
  /** Stops the embedded server if this process started it; does nothing otherwise. */
  stop(): Promise<void>;
}

const CONTEXT = 'SampleDatabase';

/**
 * The database of `config`: `DATABASE_URL`, or the embedded server (started unless another sample
 * process runs it). Says which on `logger`, and for the embedded one how to point the CLI at it
 * (unless `cliHint` is false: the demo gives its own, as its server stops when it ends).
 */
export async function openSampleDatabase(
  config: SampleConfig,
  logger: LoggerService,
  { cliHint = true }: { cliHint?: boolean } = {},
): Promise<SampleDatabase> {
  if (config.databaseUrl !== undefined) {
    logger.log(`Using the database of DATABASE_URL (${describe(config.databaseUrl)})`, CONTEXT);
    return { url: config.databaseUrl, embedded: false, stop: async () => undefined };
  }
  const dataDir = relative(process.cwd(), EMBEDDED_DATA_DIR) || EMBEDDED_DATA_DIR;
  logger.log(`No DATABASE_URL: using the embedded PostgreSQL on port ${config.embeddedPort} (data in ${dataDir})`, CONTEXT);
  const server = await startEmbeddedPostgres(config.embeddedPort);
  if (!server.owned) {
    logger.log('Another sample process already runs it; this one uses it and leaves it running', CONTEXT);
  } else {
    logger.log(`${server.initialised ? 'Initialised and started' : 'Started'} it; it stops when this process exits`, CONTEXT);
  }
  if (cliHint) logger.log(`To use the CLI on it: export DATABASE_URL=${server.url} && node bin/workhorse.js jobs list`, CONTEXT);
  return { url: server.url, embedded: true, stop: () => server.stop() };
}

/** `host:port/database`, without the password. */
function describe(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname}`;
  } catch {
    return 'an unparsable URL';
  }
}
