/**
 * Terminated connections never crash an application: real processes (test/fixtures/
 * terminated-core-app.ts and terminated-nest-app.ts, which never catch `uncaughtException`) have
 * their backends ended with `pg_terminate_backend`, as an operator, a PgBouncer restart or a
 * failover would, and must keep running, carry on with new work and exit 0 when told to stop.
 *
 * - a core worker on a pool without an `error` listener: its idle pool connections and its LISTEN
 *   connection, then new jobs are claimed and finished;
 * - installSchema on such a pool, its connection ended while it waits for the install lock: the
 *   install fails with the lost connection, the process goes on;
 * - a Nest application, with the pool it created and with a pool it was given: its idle
 *   connections, then a @Transactional() method's open transaction, which fails with a
 *   WorkhorseTransactionError saying the connection was lost; the worker goes on.
 *
 * In this process, on a pool without an `error` listener whose unheard errors are recorded (each
 * would be fatal in a real process): a CheckedOutClient broken between queries, and the
 * dashboard's overview whose read (on a checked-out client) is terminated.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Client, Pool } from 'pg';
import { CheckedOutClient } from '../../lib/core/checked-out-client';
import { Admin } from '../../lib/core';
import { createDashboardHandler } from '../../lib/dashboard/handler';
import { backendsOf, recordUnheardErrors, terminateBackends } from '../support/backends';
import { FixtureProcesses, waitForLine, type FixtureProcess } from '../support/fixture-process';
import { createTestDatabase } from '../support/db';
import { stateOf } from '../support/job-state';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const CORE_APP = join(__dirname, '..', 'fixtures', 'terminated-core-app.ts');
const NEST_APP = join(__dirname, '..', 'fixtures', 'terminated-nest-app.ts');
// A process started on a loaded 2-core machine can take this long to compile and connect.
const START_MS = 60_000;
jest.setTimeout(180_000);

const children = new FixtureProcesses();
// Worker processes run across tests here: the invariant is not read between them.
const { db, queue } = useTestDatabase({ checkInvariants: false, beforeDrop: () => children.killAll() });

/** Ends the backends and waits until they are gone. */
async function terminate(pids: number[]): Promise<void> {
  await terminateBackends(db, pids);
  await waitFor(async () => {
    const { rows } = await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = ANY ($1::int[])', [pids]);
    return rows.length === 0;
  }, 10_000, 'the terminated backends to end');
}

function backends(appName: string, condition?: string): Promise<number[]> {
  return backendsOf(db, appName, condition);
}

async function jobsIn(queueName: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM workhorse.job WHERE queue = $1', [queueName]);
  return rows[0].n;
}

/** Sends a line to the process' stdin. */
function tell(child: FixtureProcess, line: string): void {
  child.process.stdin.write(`${line}\n`);
}

/** The job is enqueued, run by the process (it says so) and recorded as succeeded. */
async function expectProcessRuns(child: FixtureProcess, queueName: string, type: string): Promise<void> {
  const jobId = await queue.enqueue(type, {}, { queue: queueName });
  await waitForLine(child, `RAN ${jobId}`, 20_000);
  await waitFor(async () => (await stateOf(db.pool, jobId)) === 'succeeded', 20_000, `job ${jobId} to succeed`);
}

/**
 * The process ended with exit code 0 and Node reported no unheard `error` event (which would
 * have ended it with code 1). Its stderr may hold the errors it logged (a Nest app logs each
 * worker.error there).
 */
function expectNoCrash(child: FixtureProcess): void {
  const stderr = child.stderr.join('');
  expect({ code: child.process.exitCode, signal: child.process.signalCode }).toEqual({ code: 0, signal: null });
  expect(stderr).not.toMatch(/Unhandled 'error' event|Emitted 'error' event|uncaught/i);
}

/** Stops the process through stdin and expects it to end by itself, with exit code 0. */
async function expectCleanExit(child: FixtureProcess): Promise<void> {
  tell(child, 'stop');
  child.process.stdin.end();
  await child.exited;
  expectNoCrash(child);
  expect(child.lines).toContain('STOPPED');
}

it('a core worker whose idle pool connections and LISTEN connection are terminated keeps running and claims new jobs', async () => {
  const appName = 'terminated-core-worker';
  const child = children.start(CORE_APP, { TERMINATED_DATABASE_URL: db.url, TERMINATED_APP_NAME: appName, TERMINATED_MODE: 'worker' });
  await waitForLine(child, 'READY', START_MS);
  // A job first, so the pool holds idle connections, and LISTEN is up.
  await expectProcessRuns(child, 'terminated', 'terminated.job');
  const listening = await waitFor(async () => {
    const pids = await backends(appName, "query ILIKE 'LISTEN%'");
    return pids.length === 1 && pids;
  }, 10_000, 'the LISTEN connection');
  const idle = await waitFor(async () => {
    const pids = await backends(appName, "state = 'idle' AND query NOT ILIKE 'LISTEN%'");
    return pids.length > 0 && pids;
  }, 10_000, 'idle pool connections');

  await terminate([...idle, ...listening]);
  await waitFor(() => child.lines.some((l) => l.startsWith('ERROR listen ')), 10_000, 'the worker to report the lost LISTEN connection');
  expect(child.process.exitCode).toBeNull();
  for (let i = 0; i < 3; i++) await expectProcessRuns(child, 'terminated', 'terminated.job');
  // LISTEN is back on a new connection.
  await waitFor(async () => {
    const pids = await backends(appName, "query ILIKE 'LISTEN%'");
    return pids.length === 1 && pids[0] !== listening[0];
  }, 20_000, 'a new LISTEN connection');
  await expectCleanExit(child);
});

it('installSchema whose connection is terminated while it waits for the install lock fails, and the process goes on', async () => {
  const appName = 'terminated-core-install';
  // The fresh-install lock (see lib/core/schema-migrator.ts), held by the test so the install of
  // an empty database waits for it.
  const empty = await createTestDatabase({ installSchema: false });
  const locker = new Client({ connectionString: empty.url });
  locker.on('error', () => undefined);
  await locker.connect();
  try {
    await locker.query('BEGIN');
    await locker.query('SELECT pg_advisory_xact_lock(7362515001)');
    const child = children.start(CORE_APP, { TERMINATED_DATABASE_URL: empty.url, TERMINATED_APP_NAME: appName, TERMINATED_MODE: 'install' });
    const waiting = await waitFor(async () => {
      const pids = await backendsOf(empty, appName, "wait_event_type = 'Lock'");
      return pids.length === 1 && pids;
    }, START_MS, 'installSchema to wait for the install lock');
    await terminate(waiting);
    const failed = await waitForLine(child, 'INSTALL-FAILED ', 10_000);
    expect(failed).toMatch(/terminating connection due to administrator command|Connection terminated/);
    await child.exited;
    expectNoCrash(child);
  } finally {
    await locker.query('ROLLBACK').catch(() => undefined);
    await locker.end();
    await empty.drop();
  }
});

describe.each([
  ['the pool the module created', '0'],
  ['a pool it was given, with no error listener', '1'],
])('a Nest application on %s', (_name, givenPool) => {
  it('survives its idle connections and an open @Transactional() transaction being terminated: the transaction fails clearly, the worker goes on', async () => {
    const appName = `terminated-nest-${givenPool}`;
    const child = children.start(NEST_APP, { TERMINATED_DATABASE_URL: db.url, TERMINATED_APP_NAME: appName, TERMINATED_GIVEN_POOL: givenPool });
    await waitForLine(child, 'READY', START_MS);
    await expectProcessRuns(child, 'terminated-nest', 'terminated.nest');
    const idle = await waitFor(async () => {
      const pids = await backends(appName, "state = 'idle'");
      return pids.length > 0 && pids;
    }, 10_000, 'idle connections');
    await terminate(idle);
    await expectProcessRuns(child, 'terminated-nest', 'terminated.nest');

    const jobsBefore = await jobsIn('terminated-nest');
    tell(child, 'tx');
    const pid = Number((await waitForLine(child, 'TX-OPEN ', 10_000)).split(' ')[1]);
    await terminate([pid]);
    tell(child, 'go');
    const failed = await waitForLine(child, 'TX-FAILED ', 10_000);
    expect(failed).toMatch(/^TX-FAILED WorkhorseTransactionError: The transaction's database connection was lost \(.+\)/);
    expect(child.lines).not.toContain('TX-COMMITTED');
    // Nothing of the transaction was committed: the job it would have enqueued does not exist.
    expect(await jobsIn('terminated-nest')).toBe(jobsBefore);

    await expectProcessRuns(child, 'terminated-nest', 'terminated.nest');
    await expectCleanExit(child);
  });
});

it('a CheckedOutClient whose backend is terminated between queries fails its next query and is destroyed on release, with nothing emitted unheard', async () => {
  const appName = 'terminated-checked-out';
  // No `error` listener on the pool: whatever reaches it unheard is recorded (in a real process it would be fatal).
  const pool = new Pool({ connectionString: db.url, max: 2, application_name: appName });
  const unheard: unknown[] = [];
  recordUnheardErrors(pool, unheard);
  const breaks: Error[] = [];
  try {
    const checkedOut = await CheckedOutClient.take(pool, (error) => breaks.push(error));
    const { rows } = await checkedOut.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await terminate([rows[0].pid]);
    await waitFor(() => checkedOut.broken, 10_000, 'the client to hear that its connection broke');
    expect(checkedOut.broken?.message).toMatch(/terminating connection due to administrator command|Connection terminated/);
    await expect(checkedOut.client.query('SELECT 1')).rejects.toThrow();
    checkedOut.release();
    checkedOut.release(); // once only
    await waitFor(() => pool.totalCount === 0, 10_000, 'the broken client to be destroyed, not returned');
    expect(breaks).toHaveLength(1);
    // The pool works on with a new connection.
    expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    expect(unheard).toEqual([]);
  } finally {
    await pool.end();
  }
});

it("the dashboard's overview, its read's connection terminated while it waits for a lock, answers and goes on serving, with nothing emitted unheard", async () => {
  const appName = 'terminated-dashboard';
  // The application's pool, with no `error` listener: whatever reaches it unheard is recorded.
  const pool = new Pool({ connectionString: db.url, max: 4, application_name: appName });
  const unheard: unknown[] = [];
  recordUnheardErrors(pool, unheard);
  const reported: unknown[] = [];
  const handler = createDashboardHandler({ admin: new Admin(pool), path: '/workhorse', authorize: () => true, onError: (e) => reported.push(e) });
  const server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // The overview reads finished jobs in a read-only transaction of its own (on a checked-out
  // client); a lock on job_outcome holds that read until its backend is terminated.
  const locker = new Client({ connectionString: db.url });
  locker.on('error', () => undefined);
  await locker.connect();
  try {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE workhorse.job_outcome IN ACCESS EXCLUSIVE MODE');
    const page = fetch(`${origin}/workhorse?window=1h`);
    const reading = await waitFor(async () => {
      const pids = await backends(appName, "wait_event_type = 'Lock' AND query ILIKE '%queue_activity_v1%'");
      return pids.length > 0 && pids;
    }, 10_000, "the overview's read to wait for the lock");
    await terminate(reading);
    await locker.query('ROLLBACK');
    // The page fails with the lost connection (reported through the dashboard's onError)...
    expect((await page).status).toBe(500);
    expect(String(reported[0])).toMatch(/terminating connection due to administrator command|Connection terminated/);
    // ...and the next one is served on a new connection.
    expect((await fetch(`${origin}/workhorse?window=1h`)).status).toBe(200);
    expect(unheard).toEqual([]);
  } finally {
    await locker.end();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await pool.end();
  }
});
