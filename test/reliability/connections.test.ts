/**
 * Killed connections: single backends of a running worker are ended with
 * `pg_terminate_backend` (found in `pg_stat_activity` by their worker's `application_name` and
 * their query text), and the worker carries on by itself:
 *
 * - the LISTEN connection: it reconnects, and later jobs are still woken by NOTIFY;
 * - the heartbeat connection: leases are still renewed, a job outliving two leases succeeds at
 *   attempt 1;
 * - a claim and a completion in flight: the claim rolls back and is made again, the completion
 *   is retried, no job gets a second outcome;
 * - pool backends killed over and over while jobs stream: every job ends with exactly one
 *   `succeeded` outcome and its attempts add up;
 * - a completion whose commit outcome is unknown is safe to send again (SQL protocol).
 *
 * In-flight statements are caught deterministically: a transaction of the test holds
 * `LOCK workhorse.job_event IN SHARE MODE`, which every claim and completion must wait for (they
 * insert events) while heartbeats (which write no event) go on renewing leases. The worker claims
 * and completes through one function, `complete_and_claim_v1`: a round with no completions in it
 * is a claim, one sent after handlers returned carries their completions.
 */
import { Client, Pool } from 'pg';
import { Queue, Worker, type HandlerContext, type WorkerEvent, type WorkerOptions } from '../../lib/core';
import { backendsOf, recordUnheardErrors, terminateBackends } from '../support/backends';
import { claimOne, forceExpire } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { delay, gate, waitFor } from '../support/wait';

// Ten minutes, the largest poll interval a worker accepts: an idle worker is then only ever
// woken by a notification.
const NO_POLLING_MS = 600_000;

const { db, queue } = useTestDatabase({
  afterEachTest: async () => {
    // Whatever a test left running stops before the invariant is read.
    const stopped = harnesses.splice(0);
    for (const h of stopped) await h.stop();
    for (const h of stopped) expect({ appName: h.appName, unheard: h.unheard }).toEqual({ appName: h.appName, unheard: [] });
  },
});

/** A worker on a pool of its own whose connections all carry `appName`, with its events recorded. */
interface Harness {
  appName: string;
  pool: Pool;
  worker: Worker;
  events: WorkerEvent[];
  /** Errors the pool or one of its clients emitted with nobody listening (each would have killed a real process). */
  unheard: unknown[];
  errorsDuring(during: string): number;
  stop(): Promise<void>;
}

const harnesses: Harness[] = [];

function harness(appName: string, options: WorkerOptions, setup: (worker: Worker) => void): Harness {
  // No `error` listener of the test's own while the worker runs: the worker's must be enough.
  const pool = new Pool({ connectionString: db.url, max: 10, application_name: appName });
  const unheard: unknown[] = [];
  recordUnheardErrors(pool, unheard);
  const worker = new Worker(new Queue(pool), options);
  setup(worker);
  const events: WorkerEvent[] = [];
  worker.on((event) => events.push(event));
  const running = worker.run();
  let stopped: Promise<void> | undefined;
  const h: Harness = {
    appName,
    pool,
    worker,
    events,
    unheard,
    errorsDuring: (during) => events.filter((e) => e.name === 'worker.error' && e.during === during).length,
    stop: () =>
      (stopped ??= (async () => {
        // Once the worker stops listening, the pool's idle connections are its owner's again
        // (docs/decisions.md), here the test's. A backend a test terminated just before reports
        // when the server gets to end it, which on a loaded machine can be after the worker
        // stopped: that is the owner's error to hear.
        pool.on('error', () => undefined);
        await worker.stop();
        await running;
        await pool.end();
      })()),
  };
  harnesses.push(h);
  return h;
}

/** Backends of one worker in this file's database, filtered by an SQL condition on pg_stat_activity. */
function backends(appName: string, condition: string): Promise<number[]> {
  return backendsOf(db, appName, condition);
}

function terminate(pids: number[]): Promise<void> {
  return terminateBackends(db, pids);
}

async function serverNow(): Promise<Date> {
  const { rows } = await db.pool.query<{ now: Date }>('SELECT clock_timestamp() AS now');
  return rows[0].now;
}

interface Outcome {
  id: string;
  state: string | null;
  final_attempt: number | null;
  attempts: number;
  succeeded_attempts: number;
  claimed_events: number;
  succeeded_events: number;
}

/** Each job's state and how its attempts were recorded. */
async function outcomes(ids: string[]): Promise<Outcome[]> {
  const { rows } = await db.pool.query<Outcome>(
    `SELECT j.id, coalesce(o.state, r.state) AS state, o.final_attempt,
            (SELECT count(*) FROM workhorse.attempt_history a WHERE a.job_id = j.id)::int AS attempts,
            (SELECT count(*) FROM workhorse.attempt_history a
             WHERE a.job_id = j.id AND a.outcome = 'succeeded')::int AS succeeded_attempts,
            (SELECT count(*) FROM workhorse.job_event e WHERE e.job_id = j.id AND e.kind = 'claimed')::int AS claimed_events,
            (SELECT count(*) FROM workhorse.job_event e WHERE e.job_id = j.id AND e.kind = 'succeeded')::int AS succeeded_events
     FROM workhorse.job j
     LEFT JOIN workhorse.job_runtime r ON r.job_id = j.id
     LEFT JOIN workhorse.job_outcome o ON o.job_id = j.id
     WHERE j.id = ANY ($1::uuid[])`,
    [ids],
  );
  return rows;
}

async function allSucceeded(ids: string[]): Promise<Outcome[] | false> {
  const rows = await outcomes(ids);
  return rows.length === ids.length && rows.every((r) => r.state === 'succeeded') && rows;
}

function succeededReports(events: WorkerEvent[]): Map<string, number> {
  const reported = new Map<string, number>();
  for (const event of events) {
    if (event.name === 'job.succeeded') reported.set(event.jobId, (reported.get(event.jobId) ?? 0) + 1);
  }
  return reported;
}

/** A transaction of the test's own that makes every claim and completion wait (see the file comment). */
async function holdEventInserts(): Promise<{ release(): Promise<void> }> {
  const client = new Client({ connectionString: db.url, application_name: 'connections-test-lock' });
  client.on('error', () => undefined);
  await client.connect();
  await client.query('BEGIN');
  await client.query('LOCK TABLE workhorse.job_event IN SHARE MODE');
  let released: Promise<void> | undefined;
  return {
    release: () =>
      (released ??= (async () => {
        await client.query('COMMIT').catch(() => undefined);
        await client.end();
      })()),
  };
}

/** A statement of the worker's that waits for the test's lock. */
function waitingFor(fn: string): string {
  return `state = 'active' AND wait_event_type = 'Lock' AND query ILIKE '%${fn}%'`;
}

it('a killed LISTEN connection is reopened and later jobs are still woken by NOTIFY', async () => {
  const h = harness('conn-listen', { queues: ['listen-kill'], pollMs: NO_POLLING_MS, tickMs: 200 }, (w) =>
    w.handle('listen.job', () => 'done'),
  );
  // Idle for a second: the wake-up that follows a (re)connect has long gone by, so whatever wakes
  // the worker afterwards is a notification.
  const listening = `query ILIKE 'LISTEN%' AND state = 'idle' AND state_change < clock_timestamp() - interval '1 second'`;
  const [first] = await waitFor(async () => {
    const pids = await backends(h.appName, listening);
    return pids.length === 1 && pids;
  }, 10_000, 'the LISTEN connection');
  const before = await queue.enqueue('listen.job', {}, { queue: 'listen-kill' });
  await waitFor(() => allSucceeded([before]), 10_000, 'a job woken by NOTIFY');

  await terminate([first]);
  await waitFor(() => h.errorsDuring('listen') > 0, 10_000, 'the worker to report the broken LISTEN connection');
  const [second] = await waitFor(async () => {
    const pids = await backends(h.appName, listening);
    return pids.length === 1 && pids[0] !== first && pids;
  }, 10_000, 'a new LISTEN connection');
  // The worker is idle and its next poll is minutes away: only the notification can wake it.
  const after = await queue.enqueue('listen.job', {}, { queue: 'listen-kill' });
  await waitFor(() => allSucceeded([after]), 10_000, 'a job enqueued after the reconnect to be woken by NOTIFY');

  // A job enqueued while LISTEN is going down may lose its notification; the wake-up that
  // follows every reconnect still finds it.
  await terminate([second]);
  const meanwhile = await queue.enqueue('listen.job', {}, { queue: 'listen-kill' });
  await waitFor(() => allSucceeded([meanwhile]), 10_000, 'a job enqueued while LISTEN was down to be found after the reconnect');
  await waitFor(async () => {
    const pids = await backends(h.appName, listening);
    return pids.length === 1 && pids[0] !== second;
  }, 10_000, 'LISTEN to be back once more');
});

it('a killed heartbeat connection is reopened and keeps the lease: a job outliving two leases succeeds at attempt 1', async () => {
  const leaseMs = 1500;
  const opened = gate();
  let claimedAt = 0;
  const h = harness(
    'conn-heartbeat',
    // Ticks often, so a lease that did lapse would be recovered (and the attempt lost) at once.
    { queues: ['heartbeat-kill'], leaseMs, heartbeatMs: 250, tickMs: 100, pollMs: 100 },
    (w) =>
      w.handle('heartbeat.job', async () => {
        claimedAt = Date.now();
        await opened.promise;
        return 'outlived';
      }),
  );
  const id = await queue.enqueue('heartbeat.job', {}, { queue: 'heartbeat-kill' });
  await waitFor(() => claimedAt > 0, 10_000, 'the handler to start');

  for (let round = 0; round < 2; round++) {
    const [beating] = await waitFor(async () => {
      const pids = await backends(h.appName, "query ILIKE '%heartbeat_many_v1%'");
      return pids.length === 1 && pids;
    }, 10_000, 'the heartbeat connection');
    const killedAt = await serverNow();
    await terminate([beating]);
    await waitFor(async () => {
      const { rows } = await db.pool.query<{ renewed: boolean }>(
        "SELECT heartbeat_at > $2 AS renewed FROM workhorse.job_runtime WHERE job_id = $1 AND state = 'active'",
        [id, killedAt],
      );
      return rows[0]?.renewed === true;
    }, 10_000, 'a renewal after the heartbeat connection was killed');
    expect(await backends(h.appName, `pid = ${beating}`)).toEqual([]);
  }
  expect(h.errorsDuring('heartbeat')).toBeGreaterThan(0);
  await waitFor(() => Date.now() - claimedAt > 2 * leaseMs, 10_000, 'the job to outlive two leases');
  opened.open();

  const [row] = await waitFor(() => allSucceeded([id]), 10_000, 'the job to succeed');
  expect(row).toMatchObject({ final_attempt: 1, attempts: 1, succeeded_attempts: 1, claimed_events: 1 });
  expect(h.events.filter((e) => e.name === 'job.lease_lost')).toEqual([]);
});

it('a claim killed in flight rolls back and is made again; no job is claimed twice', async () => {
  const ids = await queue.enqueueMany(
    Array.from({ length: 6 }, (_, i) => ({ type: 'claim.job', payload: { i }, queue: 'claim-kill' })),
  );
  const runs = new Map<string, number>();
  const lock = await holdEventInserts();
  try {
    const h = harness('conn-claim', { queues: ['claim-kill'], concurrency: 3, pollMs: 100, tickMs: 200 }, (w) =>
      w.handle('claim.job', async (_payload: unknown, ctx: HandlerContext) => {
        runs.set(ctx.jobId, (runs.get(ctx.jobId) ?? 0) + 1);
        await delay(10);
        return 'claimed once';
      }),
    );
    const [claiming] = await waitFor(async () => {
      const pids = await backends(h.appName, waitingFor('complete_and_claim_v1'));
      return pids.length === 1 && pids;
    }, 10_000, 'a claim waiting in flight');
    await terminate([claiming]);
    await waitFor(() => h.errorsDuring('claim') > 0, 10_000, 'the worker to report the failed claim');
    // The worker claims again by itself (its next poll); that claim waits for the lock too.
    await waitFor(async () => {
      const pids = await backends(h.appName, waitingFor('complete_and_claim_v1'));
      return pids.length === 1 && pids[0] !== claiming;
    }, 10_000, 'the claim to be made again');
    await lock.release();

    const rows = await waitFor(() => allSucceeded(ids), 10_000, 'every job to succeed');
    for (const row of rows) {
      expect(row).toMatchObject({ final_attempt: 1, attempts: 1, succeeded_attempts: 1, claimed_events: 1, succeeded_events: 1 });
      expect(runs.get(row.id)).toBe(1);
    }
    expect(h.worker.isRunning).toBe(true);
  } finally {
    await lock.release();
  }
});

it('a completion killed in flight is retried while the lease holds: one outcome, attempt 1', async () => {
  const opened = gate();
  const running = new Set<string>();
  const h = harness('conn-complete', { queues: ['complete-kill'], concurrency: 3, leaseMs: 10_000, pollMs: 100, tickMs: 200 }, (w) =>
    w.handle('complete.job', async (payload: { i: number }, ctx: HandlerContext) => {
      running.add(ctx.jobId);
      await opened.promise;
      return { i: payload.i };
    }),
  );
  const ids = await queue.enqueueMany(
    Array.from({ length: 3 }, (_, i) => ({ type: 'complete.job', payload: { i }, queue: 'complete-kill' })),
  );
  await waitFor(() => running.size === 3, 10_000, 'all three handlers to run');
  const lock = await holdEventInserts();
  try {
    opened.open();
    for (let round = 0; round < 2; round++) {
      const completing = await waitFor(async () => {
        const pids = await backends(h.appName, waitingFor('complete_and_claim_v1'));
        return pids.length > 0 && pids;
      }, 10_000, `a completion waiting in flight (round ${round + 1})`);
      const errorsBefore = h.errorsDuring('complete');
      await terminate(completing);
      await waitFor(() => h.errorsDuring('complete') > errorsBefore, 10_000, 'the worker to report the failed completion');
    }
    // The completion is sent again by itself, and waits for the lock once more.
    await waitFor(
      async () => (await backends(h.appName, waitingFor('complete_and_claim_v1'))).length > 0,
      10_000,
      'the completion to be retried',
    );
  } finally {
    await lock.release();
  }

  const rows = await waitFor(() => allSucceeded(ids), 10_000, 'every job to succeed');
  const results = await db.pool.query<{ job_id: string; result: { i: number } }>(
    'SELECT job_id, result FROM workhorse.job_outcome WHERE job_id = ANY ($1::uuid[])',
    [ids],
  );
  for (const row of rows) {
    // Attempt 1: the job was never recovered and run again, its first completion got through.
    expect(row).toMatchObject({ final_attempt: 1, attempts: 1, succeeded_attempts: 1, claimed_events: 1, succeeded_events: 1 });
  }
  expect(new Set(results.rows.map((r) => r.result.i))).toEqual(new Set([0, 1, 2]));
  expect([...succeededReports(h.events).entries()].sort()).toEqual(ids.map((id) => [id, 1]).sort());
});

it('pool, LISTEN and heartbeat backends killed over and over while jobs stream: one outcome per job, attempts add up', async () => {
  const runs = new Map<string, number>();
  const h = harness(
    'conn-stream',
    { queues: ['stream-kill'], concurrency: 4, leaseMs: 2000, heartbeatMs: 250, pollMs: 100, tickMs: 100 },
    (w) =>
      w.handle('stream.job', async (_payload: unknown, ctx: HandlerContext) => {
        runs.set(ctx.jobId, (runs.get(ctx.jobId) ?? 0) + 1);
        await delay(25);
        return 'done';
      }),
  );
  // Every backend of the worker, busy or idle (claims, completions, ticks, LISTEN, heartbeats),
  // is killed every few milliseconds while the jobs are being worked through, until 40 kills.
  const ids: string[] = [];
  let enqueued = false;
  let killed = 0;
  const killer = (async () => {
    while (killed < 40 && !(enqueued && (await allSucceeded(ids)))) {
      const pids = await backends(h.appName, 'true');
      await terminate(pids);
      killed += pids.length;
      await delay(20);
    }
  })();
  try {
    for (let round = 0; round < 10; round++) {
      const batch = Array.from({ length: 10 }, (_, i) => ({ type: 'stream.job', payload: { round, i }, queue: 'stream-kill' }));
      ids.push(...(await queue.enqueueMany(batch)));
      await delay(50);
    }
  } finally {
    enqueued = true;
    await killer;
  }
  expect(killed).toBeGreaterThan(0);

  const rows = await waitFor(() => allSucceeded(ids), 30_000, 'every job to succeed');
  for (const row of rows) {
    // Exactly one success; every attempt the claims started was closed once (a claim whose answer
    // was lost shows up as an expired attempt); the handler ran at most once per attempt.
    expect({ id: row.id, succeeded: row.succeeded_attempts, events: row.succeeded_events }).toEqual({
      id: row.id,
      succeeded: 1,
      events: 1,
    });
    expect({ id: row.id, attempts: row.attempts, claims: row.claimed_events }).toEqual({
      id: row.id,
      attempts: row.final_attempt,
      claims: row.final_attempt,
    });
    const ran = runs.get(row.id) ?? 0;
    expect(ran).toBeGreaterThanOrEqual(1);
    expect(ran).toBeLessThanOrEqual(row.final_attempt ?? 0);
  }
  for (const [id, count] of succeededReports(h.events)) expect({ id, count }).toEqual({ id, count: 1 });
  expect(h.events.some((e) => e.name === 'worker.error')).toBe(true);
  expect(h.worker.isRunning).toBe(true);
});

describe('a completion whose commit outcome is unknown is resolved safely', () => {
  async function written(jobId: string): Promise<unknown> {
    const { rows } = await db.pool.query(
      `SELECT (SELECT row_to_json(o) FROM workhorse.job_outcome o WHERE o.job_id = $1) AS outcome,
              (SELECT json_agg(a ORDER BY a.id) FROM workhorse.attempt_history a WHERE a.job_id = $1) AS attempts,
              (SELECT json_agg(e ORDER BY e.id) FROM workhorse.job_event e WHERE e.job_id = $1) AS events,
              (SELECT count(*)::int FROM workhorse.job_runtime r WHERE r.job_id = $1) AS runtime`,
      [jobId],
    );
    return rows[0];
  }

  it('complete_many_v1 sent twice for the same worker and fence answers succeeded again and writes nothing', async () => {
    const id = await queue.enqueue('sql.job', {}, { queue: 'sql-retry' });
    const { jobId, fence } = await claimOne(db.pool, 'sql-retry', { workerId: 'sql-worker', leaseMs: 30_000 });
    expect(jobId).toBe(id);
    const items = (result: unknown) => JSON.stringify([{ jobId, fence: Number(fence), result }]);

    const completeMany = 'SELECT job_id, status FROM workhorse.complete_many_v1($1, $2::jsonb)';
    const first = await db.pool.query(completeMany, ['sql-worker', items({ n: 1 })]);
    expect(first.rows).toEqual([{ job_id: jobId, status: 'succeeded' }]);
    const afterFirst = await written(jobId);

    // The first answer was lost with the connection: the worker sends the same completion again.
    const again = await db.pool.query(completeMany, ['sql-worker', items({ n: 2 })]);
    expect(again.rows).toEqual([{ job_id: jobId, status: 'succeeded' }]);
    const single = await db.pool.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status', [
      jobId,
      'sql-worker',
      fence,
      '{"n": 3}',
    ]);
    expect(single.rows[0].status).toBe('succeeded');
    // The worker's own retry goes through complete_and_claim_v1 (with no claim here).
    const pumped = await db.pool.query('SELECT job_id, status FROM workhorse.complete_and_claim_v1($1, $2::jsonb, $3, 0, 30000)', [
      'sql-worker',
      items({ n: 4 }),
      ['sql-retry'],
    ]);
    expect(pumped.rows).toEqual([{ job_id: jobId, status: 'succeeded' }]);
    expect(await written(jobId)).toEqual(afterFirst);
    expect(afterFirst).toMatchObject({ outcome: { state: 'succeeded', result: { n: 1 }, final_attempt: 1 }, runtime: 0 });

    // Only the owner of that attempt is recognised: another worker with the same fence is stale.
    const other = await db.pool.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status', [
      jobId,
      'other-worker',
      fence,
      '{"n": 5}',
    ]);
    expect(other.rows[0].status).toBe('stale');
    expect(await written(jobId)).toEqual(afterFirst);
  });

  it('complete_v1 with an old fence after a re-claim is stale, before and after the new attempt succeeds', async () => {
    await queue.enqueue('sql.job', {}, { queue: 'sql-fence' });
    const old = await claimOne(db.pool, 'sql-fence', { workerId: 'sql-worker', leaseMs: 30_000 });
    // The lease runs out (simulated: the protocol, not timing, is under test) and recovery makes
    // the job ready again; the same worker id claims it anew, with a new fence.
    await forceExpire(db.pool, old.jobId);
    const { rows: recovered } = await db.pool.query<{ n: number }>('SELECT workhorse.recover_expired_v1(100) AS n');
    expect(recovered[0].n).toBe(1);
    const current = await claimOne(db.pool, 'sql-fence', { workerId: 'sql-worker', leaseMs: 30_000 });
    expect(current.jobId).toBe(old.jobId);
    expect(BigInt(current.fence)).toBeGreaterThan(BigInt(old.fence));

    const complete = async (fence: string, result: unknown) =>
      (
        await db.pool.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4::jsonb) AS status', [
          old.jobId,
          'sql-worker',
          fence,
          JSON.stringify(result),
        ])
      ).rows[0].status;

    const beforeLate = await written(old.jobId);
    expect(await complete(old.fence, { from: 'old attempt' })).toBe('stale');
    expect(await written(old.jobId)).toEqual(beforeLate);

    expect(await complete(current.fence, { from: 'new attempt' })).toBe('succeeded');
    const done = await written(old.jobId);
    // A late retry of the old attempt's completion does not pass for the new attempt's success.
    expect(await complete(old.fence, { from: 'old attempt' })).toBe('stale');
    expect(await written(old.jobId)).toEqual(done);
    expect(done).toMatchObject({ outcome: { state: 'succeeded', result: { from: 'new attempt' }, final_attempt: 2 }, runtime: 0 });
  });
});

// The client a transactional handler holds is checked out of the pool, and pg-pool takes its own
// `error` listener off a checked-out client: the worker must listen itself, or the terminated
// backend's `error` would kill the process. The attempt fails with the lost connection and the
// job succeeds on its retry.
it('a transactional handler whose backend is killed does not crash the process', async () => {
  const opened = gate();
  const running = new Set<string>();
  const h = harness(
    'conn-transaction',
    { queues: ['tx-kill'], pollMs: 100, tickMs: 100 },
    (w) =>
      w.handle(
        'tx.job',
        async (_payload: unknown, ctx: HandlerContext) => {
          running.add(ctx.jobId);
          await opened.promise;
          return 'committed';
        },
        { transactional: true },
      ),
  );
  const id = await queue.enqueue('tx.job', {}, { queue: 'tx-kill', retryPolicy: { kind: 'fixed', delayMs: 100 } });
  await waitFor(() => running.has(id), 10_000, 'the transactional handler to start');
  const inTransaction = await waitFor(async () => {
    const pids = await backends(h.appName, "state = 'idle in transaction'");
    return pids.length === 1 && pids;
  }, 10_000, "the handler's transaction");
  await terminate(inTransaction);
  await waitFor(async () => (await backends(h.appName, `pid = ${inTransaction[0]}`)).length === 0, 10_000, 'the backend to end');
  opened.open();
  await waitFor(() => allSucceeded([id]), 10_000, 'the job to succeed on its retry');
  expect(h.unheard).toEqual([]);
});
