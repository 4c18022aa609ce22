/**
 * Database restarts under load. This file runs a PostgreSQL 15 server of its own (Debian's
 * binaries, a throw-away cluster in a temporary directory), never the shared test server, and
 * restarts it (`pg_ctl stop -m fast`, then `-m immediate`, each followed by `pg_ctl start`) while
 * a worker processes a steady stream of jobs and a producer keeps enqueueing:
 *
 * - nothing crashes: Jest fails the running test on any uncaught exception or unhandled
 *   rejection, which is what an `error` event of `pg` with no listener becomes;
 * - the worker reports the outage as `worker.error` events and keeps running;
 * - an enqueue while the server is down rejects to its caller;
 * - a job running across the restart has its lease renewed afterwards (the heartbeat connection
 *   came back) and succeeds at attempt 1;
 * - processing resumes, and at the end a job enqueued into an idle worker whose poll interval is
 *   ten minutes is processed at once: only a reconnected LISTEN can have woken it;
 * - every committed job ends `succeeded`, exactly once.
 *
 * The same scenario runs against the core `Worker` and against a Nest application whose
 * `WorkhorseModule` has `worker` options and owns its pool.
 */
import { Injectable, Logger } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { execFile } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Pool } from 'pg';
import { installSchema, Queue, Worker, type HandlerContext, type JsonValue, type WorkerEvent } from '../../lib/core';
import { JobHandler, WorkhorseModule, WorkhorseWorker } from '../../lib/nest';
import { freePort } from '../../lib/testing/free-port';
import { expectSplitInvariant } from '../support/invariants';
import { stateOf } from '../support/job-state';
import { delay, gate, waitFor, type Gate } from '../support/wait';

const PG_BIN = process.env.WORKHORSE_PG15_BIN ?? '/usr/lib/postgresql/15/bin';
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

// Ten minutes, the largest poll interval a worker accepts: within this file a worker that was
// idle is only ever woken by a notification.
const NO_POLLING_MS = 600_000;

const WORKER_OPTIONS = {
  concurrency: 4,
  // Long enough to outlast a restart (an immediate one, with crash recovery, takes seconds on a
  // busy machine), so that a job running across one keeps its lease and finishes at attempt 1.
  // A claim whose answer the restart swallowed is recovered only when this lease runs out.
  leaseMs: 20_000,
  heartbeatMs: 300,
  pollMs: NO_POLLING_MS,
  tickMs: 200,
  shutdownTimeoutMs: 5000,
};

// ---- a PostgreSQL server of this file's own --------------------------------------------------

function exec(file: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, encoding: 'utf8', timeout: 120_000 }, (error, stdout, stderr) => {
      const output = `${stdout}${stderr}`.trim();
      if (error) reject(new Error(`${[file, ...args].join(' ')} failed: ${error.message}\n${output}`));
      else resolve(output);
    });
  });
}

/** Runs a PostgreSQL program; it refuses to run as root, so as root it runs as the OS user `postgres`. */
function runProgram(file: string, args: string[], cwd: string): Promise<string> {
  return isRoot ? exec('runuser', ['-u', 'postgres', '--', file, ...args], cwd) : exec(file, args, cwd);
}

class OwnServer {
  private options = '';
  private constructor(
    private readonly tempDir: string,
    private readonly port: number,
  ) {}

  private get dataDir(): string {
    return join(this.tempDir, 'data');
  }

  private get logFile(): string {
    return join(this.tempDir, 'server.log');
  }

  static async start(): Promise<OwnServer> {
    for (const program of ['initdb', 'pg_ctl']) {
      if (!existsSync(join(PG_BIN, program))) {
        throw new Error(
          `${join(PG_BIN, program)} does not exist: this test needs PostgreSQL 15's server programs ` +
            '(apt-get install postgresql-15, or set WORKHORSE_PG15_BIN to their directory).',
        );
      }
    }
    const tempDir = await mkdtemp(join(tmpdir(), 'workhorse-restart-'));
    if (isRoot) {
      const uid = Number(await exec('id', ['-u', 'postgres'], tempDir).catch(() => ''));
      const gid = Number(await exec('id', ['-g', 'postgres'], tempDir).catch(() => ''));
      if (!(uid > 0 && gid > 0)) throw new Error("running as root, but there is no OS user 'postgres' to run PostgreSQL as");
      await chown(tempDir, uid, gid);
    }
    const server = new OwnServer(tempDir, await freePort());
    try {
      const initdb = ['-D', server.dataDir, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync'];
      await runProgram(join(PG_BIN, 'initdb'), initdb, tempDir);
      // fsync=off only: commits still write their WAL before they return (synchronous_commit
      // stays on), so an immediate shutdown, which is a crash of the server processes but not of
      // the machine, loses nothing committed. That is the property under test.
      const options = [
        `-p ${server.port}`,
        `-k ${tempDir}`,
        '-c listen_addresses=127.0.0.1',
        '-c max_connections=100',
        '-c fsync=off',
      ];
      server.options = options.join(' ');
      await server.pgCtl(['start', '-o', server.options]);
    } catch (error) {
      await server.stop().catch(() => undefined);
      throw error;
    }
    return server;
  }

  url(database: string): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Stops the server (`-m immediate` is a crash of the server processes); see {@link startAgain}. */
  async shutdown(mode: 'fast' | 'immediate'): Promise<void> {
    await this.pgCtl(['stop', '-m', mode]);
  }

  /** Starts the stopped server again (after an immediate stop, with crash recovery). */
  async startAgain(): Promise<void> {
    await this.pgCtl(['start', '-o', this.options]);
  }

  async stop(): Promise<void> {
    try {
      if (existsSync(join(this.dataDir, 'postmaster.pid'))) await this.pgCtl(['stop', '-m', 'fast']);
    } finally {
      await rm(this.tempDir, { recursive: true, force: true });
    }
  }

  // `-l`: the server's output goes to the log file, never into pg_ctl's pipes (which would then
  // stay open as long as the server runs).
  private pgCtl(args: string[]): Promise<string> {
    return runProgram(join(PG_BIN, 'pg_ctl'), [...args, '-D', this.dataDir, '-l', this.logFile, '-w', '-t', '60'], this.tempDir);
  }
}

// ---- helpers ---------------------------------------------------------------------------------

// What the handlers of both variants do: `stream.tick` is the steady stream, `stream.hold` runs
// until the test opens its gate, so it is certainly running while the server restarts.
const holdGates = new Map<string, Gate>();
const holding = new Set<string>();

async function tick(payload: { seq: number }): Promise<{ seq: number }> {
  await delay(5);
  return { seq: payload.seq };
}

async function hold(payload: { gate: string }, ctx: HandlerContext): Promise<string> {
  const opened = holdGates.get(payload.gate);
  if (!opened) throw new Error(`no gate ${payload.gate}`);
  holding.add(ctx.jobId);
  await opened.promise;
  return 'held';
}

@Injectable()
class StreamHandlers {
  @JobHandler('stream.tick')
  tick(payload: { seq: number }): Promise<{ seq: number }> {
    return tick(payload);
  }

  @JobHandler('stream.hold')
  hold(payload: { gate: string }, ctx: HandlerContext): Promise<string> {
    return hold(payload, ctx);
  }

}

/** Enqueues `stream.tick` jobs one after another until stopped, keeping what committed and what was refused. */
class Producer {
  readonly committed: string[] = [];
  readonly rejected: Error[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(enqueue: (type: string, payload: JsonValue) => Promise<string>) {
    this.loop = (async () => {
      for (let seq = 0; !this.stopped; seq++) {
        try {
          this.committed.push(await enqueue('stream.tick', { seq }));
        } catch (error) {
          this.rejected.push(error as Error);
        }
        await delay(15);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

interface JobRow {
  id: string;
  type: string;
  state: string | null;
  final_attempt: number | null;
  succeeded_attempts: number;
  succeeded_events: number;
}

async function jobRows(pool: Pool): Promise<JobRow[]> {
  const { rows } = await pool.query<JobRow>(`
    SELECT j.id, j.type, coalesce(o.state, r.state) AS state, o.final_attempt,
           (SELECT count(*) FROM workhorse.attempt_history a
            WHERE a.job_id = j.id AND a.outcome = 'succeeded')::int AS succeeded_attempts,
           (SELECT count(*) FROM workhorse.job_event e WHERE e.job_id = j.id AND e.kind = 'succeeded')::int AS succeeded_events
    FROM workhorse.job j
    LEFT JOIN workhorse.job_runtime r ON r.job_id = j.id
    LEFT JOIN workhorse.job_outcome o ON o.job_id = j.id`);
  return rows;
}

/** What one variant (core or Nest) gives the scenario. */
interface Subject {
  /** application_name of every connection the worker side opens. */
  appName: string;
  /** The worker's database, read by the test through a pool of its own. */
  check: Pool;
  enqueue(type: string, payload: JsonValue): Promise<string>;
  events: WorkerEvent[];
  activeCount(): number;
}

let server: OwnServer;
const checkPools: Pool[] = [];

async function createDatabase(name: string): Promise<{ url: string; check: Pool }> {
  const admin = new Client({ connectionString: server.url('postgres') });
  admin.on('error', () => undefined);
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const url = server.url(name);
  // The test's own reading pool; its idle connections die with each restart, which is no error.
  const check = new Pool({ connectionString: url, max: 3, application_name: 'restart-test-check' });
  check.on('error', () => undefined);
  checkPools.push(check);
  return { url, check };
}

/**
 * Restarts the server while `subject` works through the producer's stream and one `stream.hold`
 * job runs across the restart.
 */
async function restartUnderLoad(subject: Subject, producer: Producer, mode: 'fast' | 'immediate'): Promise<void> {
  const name = `${subject.appName}-${mode}`;
  const opened = gate();
  holdGates.set(name, opened);
  const held = await subject.enqueue('stream.hold', { gate: name });
  await waitFor(() => holding.has(held), 20_000, `the ${mode} hold job to start`, { retryErrors: true });

  const rejectedBefore = producer.rejected.length;
  const errorsBefore = subject.events.filter((e) => e.name === 'worker.error').length;
  const eventsBefore = subject.events.length;
  await server.shutdown(mode);
  // An enqueue while the server is down is refused to its caller, not swallowed. (The
  // producer's own attempts during the outage may be none at all on a busy machine.)
  await expect(subject.enqueue('stream.tick', { seq: -1 })).rejects.toHaveProperty('message', expect.stringMatching(/\S/));
  await server.startAgain();
  const { rows } = await waitFor(
    () => subject.check.query<{ now: Date }>('SELECT clock_timestamp() AS now'),
    20_000,
    'the check pool to reach the restarted server',
    { retryErrors: true },
  );
  const restartedAt = rows[0].now;
  const committedAtRestart = producer.committed.length;

  // Processing resumes: a job the producer committed after the restart is done.
  await waitFor(
    async () =>
      producer.committed.length > committedAtRestart &&
      (await stateOf(subject.check, producer.committed[committedAtRestart])) === 'succeeded',
    20_000,
    `a job enqueued after the ${mode} restart to succeed`,
    { retryErrors: true },
  );
  // Whatever the producer tried during the outage was refused with a message, not swallowed.
  // (Errors from node's own modules belong to another realm than Jest's `Error`: check the shape.)
  for (const error of producer.rejected.slice(rejectedBefore)) expect(error.message).toEqual(expect.stringMatching(/\S/));
  // The worker saw the outage and said so, instead of crashing or staying silent.
  const outage = subject.events.filter((e) => e.name === 'worker.error').slice(errorsBefore);
  expect(outage.length).toBeGreaterThan(0);
  // And it says when the database is reachable again: each of its recurring operations that
  // failed reports, once, that it works again.
  const failed = new Set(outage.map((e) => e.name === 'worker.error' && e.during).filter((d) => d !== 'pool' && d !== 'fail'));
  const reconnected = () => subject.events.slice(eventsBefore).filter((e) => e.name === 'worker.reconnected');
  await waitFor(
    () => [...failed].every((during) => reconnected().some((e) => e.name === 'worker.reconnected' && e.during === during)),
    20_000,
    `worker.reconnected for each of ${[...failed].join(', ')} after the ${mode} restart`,
  );
  for (const event of reconnected()) {
    if (event.name === 'worker.reconnected') expect(event).toMatchObject({ failures: expect.any(Number), downMs: expect.any(Number) });
  }

  // The heartbeat connection came back: the held job's lease is renewed after the restart.
  await waitFor(async () => {
    const { rows: lease } = await subject.check.query<{ renewed: boolean }>(
      "SELECT heartbeat_at > $2 AS renewed FROM workhorse.job_runtime WHERE job_id = $1 AND state = 'active'",
      [held, restartedAt],
    );
    return lease[0]?.renewed === true;
  }, 20_000, `a heartbeat for the held job after the ${mode} restart`, { retryErrors: true });
  opened.open();
  await waitFor(async () => (await stateOf(subject.check, held)) === 'succeeded', 20_000, `the ${mode} hold job to succeed`, { retryErrors: true });
  const { rows: outcome } = await subject.check.query<{ final_attempt: number }>(
    'SELECT final_attempt FROM workhorse.job_outcome WHERE job_id = $1',
    [held],
  );
  expect(outcome[0].final_attempt).toBe(1);
}

/** Two restarts under load, then the exactly-once count and the LISTEN proof. */
async function scenario(subject: Subject): Promise<void> {
  const producer = new Producer((type, payload) => subject.enqueue(type, payload));
  try {
    await waitFor(
      async () => producer.committed.length >= 10 && (await stateOf(subject.check, producer.committed[9])) === 'succeeded',
      20_000,
      'the stream to flow',
      { retryErrors: true },
    );
    await restartUnderLoad(subject, producer, 'fast');
    await restartUnderLoad(subject, producer, 'immediate');
  } finally {
    await producer.stop();
  }

  // Every committed job ends succeeded, exactly once: one outcome (the primary key allows no
  // more), one succeeded attempt, one succeeded event, and at most one job.succeeded report.
  const committed = new Set(producer.committed);
  const rows = await waitFor(async () => {
    const all = await jobRows(subject.check);
    return all.every((r) => r.state === 'succeeded') && all;
  }, 40_000, 'every job to succeed', { retryErrors: true });
  const ids = new Set(rows.map((r) => r.id));
  for (const id of committed) expect(ids.has(id)).toBe(true);
  // A refused enqueue may still have committed (its answer was lost with the connection); it is
  // then a job like any other. Nothing else may appear.
  expect(rows.filter((r) => r.type === 'stream.tick' && !committed.has(r.id)).length).toBeLessThanOrEqual(producer.rejected.length);
  for (const row of rows) {
    expect({ id: row.id, attempts: row.succeeded_attempts, events: row.succeeded_events }).toEqual({
      id: row.id,
      attempts: 1,
      events: 1,
    });
  }
  // Among the outage's reports: the LISTEN connection broke with the server.
  expect(subject.events.some((e) => e.name === 'worker.error' && e.during === 'listen')).toBe(true);
  const reported = new Map<string, number>();
  for (const event of subject.events) {
    if (event.name === 'job.succeeded') reported.set(event.jobId, (reported.get(event.jobId) ?? 0) + 1);
  }
  for (const [id, count] of reported) expect({ id, count }).toEqual({ id, count: 1 });

  // LISTEN reconnected: once the worker is idle (nothing running, nothing ready) and its LISTEN
  // connection is back, a new job is picked up although the next poll is minutes away.
  await waitFor(async () => {
    const { rows: live } = await subject.check.query<{ n: number }>('SELECT count(*)::int AS n FROM workhorse.job_runtime');
    return subject.activeCount() === 0 && live[0].n === 0;
  }, 20_000, 'the worker to go idle', { retryErrors: true });
  await waitFor(async () => {
    const { rows: listening } = await subject.check.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE 'LISTEN%' AND state = 'idle'
         -- The wake-up that follows a reconnect has long gone by: what wakes the worker now is a notification.
         AND state_change < clock_timestamp() - interval '1 second'`,
      [subject.appName],
    );
    return listening[0].n === 1;
  }, 20_000, 'the LISTEN connection to be back', { retryErrors: true });
  const marker = await subject.enqueue('stream.tick', { seq: -1 });
  await waitFor(
    async () => (await stateOf(subject.check, marker)) === 'succeeded',
    10_000,
    'the job after the restarts to be woken by NOTIFY',
    { retryErrors: true },
  );
}

beforeAll(async () => {
  Logger.overrideLogger(false);
  server = await OwnServer.start();
}, 60_000);

afterEach(async () => {
  for (const check of checkPools) await expectSplitInvariant(check);
});

afterAll(async () => {
  jest.restoreAllMocks();
  for (const check of checkPools) await check.end();
  await server?.stop();
});

it('a core Worker rides out a fast and an immediate restart: nothing lost, nothing done twice', async () => {
  const { url, check } = await createDatabase('core_restart');
  const appName = 'restart-core';
  // No `error` listener of the test's own on this pool: the running worker's must be enough.
  const pool = new Pool({ connectionString: url, max: 10, application_name: appName });
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  try {
    const setup = new Pool({ connectionString: url, max: 1 });
    setup.on('error', () => undefined);
    await installSchema(setup).finally(() => setup.end());

    const queue = new Queue(pool);
    const events: WorkerEvent[] = [];
    const started = new Worker(queue, WORKER_OPTIONS).handle('stream.tick', tick).handle('stream.hold', hold);
    worker = started;
    started.on((event) => events.push(event));
    running = started.run();
    await scenario({
      appName,
      check,
      enqueue: (type, payload) => queue.enqueue(type, payload),
      events,
      activeCount: () => started.activeCount,
    });
  } finally {
    await worker?.stop();
    await running;
    await pool.end();
  }
});

it('a Nest application with worker options rides out a fast and an immediate restart', async () => {
  const { url, check } = await createDatabase('nest_restart');
  const logged: string[] = [];
  const appName = 'restart-nest';
  let moduleRef: TestingModule | undefined;
  try {
    moduleRef = await Test.createTestingModule({
      imports: [
        WorkhorseModule.forRoot({
          connectionString: url,
          poolConfig: { max: 10, application_name: appName },
          worker: WORKER_OPTIONS,
        }),
      ],
      providers: [StreamHandlers],
    }).compile();
    // compile() installs Jest's testing logger, which prints every worker.error of the outage.
    Logger.overrideLogger(false);
    jest.spyOn(Logger.prototype, 'log').mockImplementation((message: unknown) => void logged.push(String(message)));
    await moduleRef.init();
    const worker = moduleRef.get(WorkhorseWorker);
    const queue = moduleRef.get(Queue);
    const events: WorkerEvent[] = [];
    const subscription = worker.events$.subscribe((event) => events.push(event));
    try {
      await scenario({
        appName,
        check,
        enqueue: (type, payload) => queue.enqueue(type, payload),
        events,
        activeCount: () => worker.activeCount,
      });
    } finally {
      subscription.unsubscribe();
    }
    expect(worker.isRunning).toBe(true);
    // The Nest worker logs the return of the database, not only the failures.
    expect(logged.some((line) => line.includes('the database is reachable again'))).toBe(true);
  } finally {
    await moduleRef?.close();
  }
});
