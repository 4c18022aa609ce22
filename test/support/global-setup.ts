/**
 * Jest global setup: runs once, in Jest's main process, before any test file.
 *
 * With WORKHORSE_TEST_DATABASE_URL set (as `npm run test:pg15` does), the tests use that
 * server and nothing is started. Without it, an embedded PostgreSQL server is started on a
 * free loopback port and its superuser URL is put into WORKHORSE_TEST_DATABASE_URL, which the
 * test workers inherit: Jest forks them after this function has returned (and with
 * --runInBand the tests run in this very process).
 */
import { startEmbeddedPostgres } from '../../lib/testing/embedded-postgres';
import { DATABASE_URL_ENV, setEmbeddedServer, TEST_SERVER_OPTIONS } from './test-server';
const { generatePrismaClient } = require('../integrations/prisma/generate.js') as { generatePrismaClient(): void };

export default async function globalSetup(): Promise<void> {
  // The Prisma tests import a generated client; generating it takes a second, and nothing when current.
  generatePrismaClient();
  if (process.env[DATABASE_URL_ENV]) return;
  const server = await startEmbeddedPostgres(TEST_SERVER_OPTIONS);
  setEmbeddedServer(server);
  process.env[DATABASE_URL_ENV] = server.url;
}
