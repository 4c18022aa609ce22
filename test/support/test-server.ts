/**
 * The PostgreSQL server the tests run on: the environment variable that names it, the options
 * of the embedded one that `npm test` starts (with `nestjs-workhorse/testing`'s
 * `startEmbeddedPostgres`, as users' own tests can), and the hand-over of that server from Jest's
 * global setup to its global teardown.
 */
import type { EmbeddedPostgres, EmbeddedPostgresOptions } from '../../lib/testing/embedded-postgres';

/** The environment variable through which the tests find their PostgreSQL server. */
export const DATABASE_URL_ENV = 'WORKHORSE_TEST_DATABASE_URL';

/**
 * A throw-away server (temporary data, durability off): enough connections for two Jest
 * workers each holding pools of 20 plus the tests' own extra clients; plain password
 * authentication over loopback, because the suite opens thousands of connections and SCRAM
 * costs each one a key derivation.
 */
export const TEST_SERVER_OPTIONS: EmbeddedPostgresOptions = {
  authMethod: 'password',
  settings: ['max_connections=300'],
};

// Jest loads global setup and teardown as separate modules in its main process; what they
// share is that process' global object.
const KEY = Symbol.for('nestjs-workhorse.test.embedded-server');

type Holder = { [KEY]?: EmbeddedPostgres };

export function setEmbeddedServer(server: EmbeddedPostgres): void {
  (globalThis as Holder)[KEY] = server;
}

export function takeEmbeddedServer(): EmbeddedPostgres | undefined {
  const holder = globalThis as Holder;
  const server = holder[KEY];
  delete holder[KEY];
  return server;
}
