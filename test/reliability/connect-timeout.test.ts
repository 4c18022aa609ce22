/**
 * Start-up never hangs (issue 16, item 3). A "database" that accepts TCP connections and never
 * answers (a port of another service, a stalled proxy, a firewall that swallows packets) used to
 * hang a Nest application forever after "Starting Nest application...", and every core call
 * with it. Now getting a connection is bounded by the pool's connect timeout (node-postgres'
 * `connectionTimeoutMillis`, 10 s by default unless the pool sets one) and fails with a typed
 * `ConnectTimeoutError` that names the host and the timeout, never the password; the client
 * closes the connection it gave up on, so nothing is left open.
 */
import { NestFactory } from '@nestjs/core';
import { Module } from '@nestjs/common';
import { Pool } from 'pg';
import {
  Admin,
  ConnectTimeoutError,
  DEFAULT_CONNECT_TIMEOUT_MS,
  installSchema,
  Queue,
  WorkhorseModule,
  type WorkhorseModuleOptions,
} from 'nestjs-workhorse';
import { startSilentServer, type SilentServer } from '../support/silent-server';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

let silent: SilentServer;
const pools: Pool[] = [];

function poolOn(config: ConstructorParameters<typeof Pool>[0]): Pool {
  const pool = new Pool(config);
  pool.on('error', () => undefined);
  pools.push(pool);
  return pool;
}

/** Starts a Nest application the way `main.ts` does (NestFactory), importing the module with `options`. */
async function startApp(options: WorkhorseModuleOptions): Promise<never> {
  @Module({ imports: [WorkhorseModule.forRoot(options)] })
  class AppModule {}
  // abortOnError: false, so that a failed start rejects instead of ending the test process.
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
  await app.close();
  throw new Error('the application started against a server that never answers');
}

async function expectTimeout(attempt: Promise<unknown>, timeoutMs: number, waited: 'connect' | 'pool', target: string): Promise<ConnectTimeoutError> {
  const error = await attempt.then(
    () => {
      throw new Error('expected a ConnectTimeoutError, but the call succeeded');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConnectTimeoutError);
  const timeout = error as ConnectTimeoutError;
  expect({ timeoutMs: timeout.timeoutMs, waited: timeout.waited, target: timeout.target }).toEqual({ timeoutMs, waited, target });
  expect(timeout.message).toContain(`at ${target}`);
  expect(timeout.message).toContain(`within ${timeoutMs} ms`);
  expect(timeout.message).toContain('connectionTimeoutMillis');
  expect(timeout.message).not.toContain('secret');
  return timeout;
}

beforeEach(async () => {
  silent = await startSilentServer();
});

afterEach(async () => {
  for (const pool of pools.splice(0)) await pool.end();
  await silent.close();
});

describe('a database that accepts connections and never answers', () => {
  it(`fails the Nest start-up and core calls after the default ${DEFAULT_CONNECT_TIMEOUT_MS} ms, with a typed error`, async () => {
    const target = `127.0.0.1:${silent.port}/shop`;
    // A pool made without any connect timeout, as `new Pool({ connectionString })` is.
    const userPool = poolOn({ connectionString: silent.url });
    const [nest, enqueue, install] = await Promise.all([
      expectTimeout(startApp({ connectionString: silent.url }), DEFAULT_CONNECT_TIMEOUT_MS, 'connect', target),
      expectTimeout(new Queue(userPool).enqueue('email.send', { to: 'ada@example.com' }), DEFAULT_CONNECT_TIMEOUT_MS, 'connect', target),
      expectTimeout(installSchema(poolOn({ connectionString: silent.url })), DEFAULT_CONNECT_TIMEOUT_MS, 'connect', target),
    ]);
    expect(nest.message).toMatch(/^Could not connect to PostgreSQL at 127\.0\.0\.1:\d+\/shop within 10000 ms/);
    expect([enqueue.name, install.name]).toEqual(['ConnectTimeoutError', 'ConnectTimeoutError']);
    // The pool the user gave Queue now has the default, in node-postgres' own setting.
    expect(userPool.options.connectionTimeoutMillis).toBe(DEFAULT_CONNECT_TIMEOUT_MS);
    // Each gave up by closing its connection: the Nest module closed the pool it had created.
    expect(silent.accepted).toBeGreaterThanOrEqual(3);
    await waitFor(() => silent.closedByClient === silent.accepted, 5_000, 'the clients to close their connections');
  }, 45_000);

  it("keeps a pool's own connect timeout: core Admin and the Nest module's poolConfig", async () => {
    const target = `127.0.0.1:${silent.port}/shop`;
    const pool = poolOn({ connectionString: silent.url, connectionTimeoutMillis: 300 });
    await expectTimeout(new Admin(pool).getJob('01a22858-3d78-7624-95c6-4dc3ae0605a2'), 300, 'connect', target);
    expect(pool.options.connectionTimeoutMillis).toBe(300);
    await expectTimeout(startApp({ connectionString: silent.url, poolConfig: { connectionTimeoutMillis: 400 } }), 400, 'connect', target);
    await expectTimeout(startApp({ pool: poolOn({ connectionString: silent.url, connectionTimeoutMillis: 500 }) }), 500, 'connect', target);
    await waitFor(() => silent.closedByClient === silent.accepted, 5_000, 'the clients to close their connections');
  });
});

describe('a pool whose connections are all in use', () => {
  const { db } = useTestDatabase({ checkInvariants: false });

  it('fails a call that waited longer than the connect timeout for a free connection, saying so', async () => {
    const pool = poolOn({ connectionString: db.url, max: 1, connectionTimeoutMillis: 300 });
    const held = await pool.connect();
    try {
      const error = await expectTimeout(
        new Queue(pool).enqueue('email.send', {}),
        300,
        'pool',
        `${new URL(db.url).hostname}:${new URL(db.url).port}/${db.name}`,
      );
      expect(error.message).toContain('every connection of the pool was in use');
    } finally {
      held.release();
    }
    // Once a connection is free again, the same pool works.
    await expect(new Queue(pool).enqueue('email.send', {})).resolves.toEqual(expect.any(String));
  });
});
