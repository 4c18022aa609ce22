/**
 * Jest global teardown: runs once, in Jest's main process, after all test files, whether
 * they passed or not. Stops the embedded server that global-setup.ts started (if it started
 * one) and removes its temporary directory.
 */
import { DATABASE_URL_ENV, takeEmbeddedServer } from './test-server';

export default async function globalTeardown(): Promise<void> {
  const server = takeEmbeddedServer();
  if (server === undefined) return;
  // The URL pointed at this server; a later run in the same process (watch mode) starts anew.
  if (process.env[DATABASE_URL_ENV] === server.url) delete process.env[DATABASE_URL_ENV];
  await server.stop();
}
