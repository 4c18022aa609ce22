/**
 * Starts (or finds) the sample app's embedded PostgreSQL server: data in `sample-app/.pgdata`,
 * listening on 127.0.0.1 at a fixed port. The server runs in a process of its own (see
 * `embedded-postgres.server.ts` for why) that stops it when this process calls `stop()`, exits or
 * dies.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { embeddedDatabaseUrl, type EmbeddedServerMessage } from './embedded-postgres.protocol';

const RUN_TS = join(__dirname, '..', '..', 'scripts', 'run-ts.js');
const SERVER = join(__dirname, 'embedded-postgres.server.ts');
/** The first run initialises the data directory, which takes a few seconds more. */
const START_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 30_000;

export interface EmbeddedPostgres {
  url: string;
  port: number;
  /** False when another process (an earlier `npm start`, say) runs the server and this one only uses it. */
  owned: boolean;
  /** True when this run created the data directory. */
  initialised: boolean;
  /** Stops the server if this process started it; resolves once it has stopped. */
  stop(): Promise<void>;
}

type Probe = 'up' | 'down' | 'busy';

/** Is a server with our credentials answering on the port? */
async function probe(url: string): Promise<Probe> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return 'up';
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ECONNREFUSED') return 'down';
    if (code === '57P03') return 'busy'; // starting up or shutting down
    const port = new URL(url).port;
    throw new Error(
      `Something else answers on 127.0.0.1:${port} (${(error as Error).message}). ` +
        'Set SAMPLE_PG_PORT to a free port, or DATABASE_URL to use a database of your own.',
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function probeUntilSettled(url: string, timeoutMs: number): Promise<'up' | 'down'> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await probe(url);
    if (state !== 'busy') return state;
    if (Date.now() > deadline) throw new Error('the embedded PostgreSQL stayed busy (starting or stopping) too long');
    await sleep(250);
  }
}

function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

function startServerProcess(port: number): Promise<{ child: ChildProcess; initialised: boolean }> {
  const child = fork(RUN_TS, [SERVER, String(port)], {
    // Its own session: Ctrl+C in the terminal must not reach PostgreSQL (see the server file).
    detached: true,
    execArgv: [],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  let initialised = false;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`the embedded PostgreSQL did not start within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    const fail = (error: Error) => {
      clearTimeout(timer);
      child.removeAllListeners('message');
      if (child.connected) child.disconnect();
      reject(error);
    };
    child.on('message', (message: EmbeddedServerMessage) => {
      if (message.type === 'initialised') initialised = true;
      else if (message.type === 'failed') fail(new Error(message.message));
      else if (message.type === 'ready') {
        clearTimeout(timer);
        child.removeAllListeners('exit');
        resolve({ child, initialised });
      }
    });
    child.once('exit', (code, signal) => fail(new Error(`the embedded PostgreSQL process exited (${signal ?? `code ${code}`})`)));
  });
}

/**
 * The embedded server on `port`: the one already running there (started by another sample
 * process), or a new one.
 */
export async function startEmbeddedPostgres(port: number): Promise<EmbeddedPostgres> {
  const url = embeddedDatabaseUrl(port);
  const shared = (): EmbeddedPostgres => ({ url, port, owned: false, initialised: false, stop: async () => undefined });
  if ((await probeUntilSettled(url, 20_000)) === 'up') return shared();

  let started: { child: ChildProcess; initialised: boolean };
  try {
    started = await startServerProcess(port);
  } catch (error) {
    // Another sample process may have started it meanwhile.
    if ((await probe(url).catch(() => 'down')) === 'up') return shared();
    throw error;
  }
  const { child, initialised } = started;
  // Do not keep this process alive just for the server; stop() takes it back.
  child.unref();
  child.channel?.unref();

  let stopped: Promise<void> | undefined;
  return {
    url,
    port,
    owned: true,
    initialised,
    stop(): Promise<void> {
      stopped ??= (async () => {
        child.ref();
        if (child.connected) child.disconnect();
        if (!(await waitForExit(child, STOP_TIMEOUT_MS))) {
          // The server process leads its own process group, PostgreSQL included.
          if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
          throw new Error(`the embedded PostgreSQL did not stop within ${STOP_TIMEOUT_MS} ms`);
        }
      })();
      return stopped;
    },
  };
}
