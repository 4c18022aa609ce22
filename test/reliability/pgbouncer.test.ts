/**
 * Behind PgBouncer in transaction pooling mode (issue 6, item 4). Every statement the library
 * sends may land on a different server connection, so anything tied to a session (named
 * prepared statements, session advisory locks, SET outside a transaction, LISTEN) would break.
 * The worker's one prepared statement is refused here whenever its statements change server
 * connections (PgBouncer 1.18 does not track prepared statements; in the runs we watched it
 * was), and the worker goes on unprepared: the main test below asserts no worker.error.
 * Through a real PgBouncer with fewer server connections than clients: enqueue (also inside a
 * caller's transaction), claim, heartbeat, complete, retry, checkpoints, cancel, maintenance
 * ticks, schema installation and admin reads; and a worker whose LISTEN bypasses the pooler.
 *
 * Skips (saying so) only when the `pgbouncer` executable is not installed; `.ci/run` installs it,
 * and under CI=true a missing one fails the suite instead.
 */
import { Client, Pool } from 'pg';
import {
  Admin,
  getSchemaStatus,
  installSchema,
  Queue,
  MIN_SCHEMA_VERSION,
  SCHEMA_VERSION,
  Worker,
  type EnqueueRequest,
  type JobSnapshot,
  type WorkerEvent,
} from '../../lib/core';
import { adminUrl, createTestDatabase, type TestDatabase } from '../support/db';
import { findPgBouncer, startPgBouncer, type PgBouncer } from '../support/pgbouncer';
import { claim, forceExpire } from '../support/protocol';
import { describeIf, type Requirement } from '../support/requirements';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const POOL_SIZE = 3;
const PGBOUNCER: Requirement = {
  met: findPgBouncer() !== null,
  missing: 'the `pgbouncer` executable is not installed (apt-get install pgbouncer; .ci/run does this)',
  // CI must prove the PgBouncer path: there a missing pgbouncer fails the run instead of skipping.
  requiredInCi: true,
};

describeIf(PGBOUNCER, 'behind PgBouncer in transaction pooling mode', () => {
  const { db } = useTestDatabase({
    afterEachTest: async () => {
      for (const { worker, done } of workers.splice(0)) {
        await worker.stop();
        await done;
      }
    },
    beforeDrop: async () => {
      for (const { worker, done } of workers.splice(0)) {
        await worker.stop().catch(() => undefined);
        await done.catch(() => undefined);
      }
      for (const p of extraPools) await p.end().catch(() => undefined);
      await pool?.end().catch(() => undefined);
      await bouncer?.stop();
      for (const d of extraDatabases) await d.drop();
    },
  });
  let bouncer: PgBouncer;
  /** Through PgBouncer: what the library under test uses. */
  let pool: Pool;
  let queue: Queue;
  let admin: Admin;
  const workers: { worker: Worker; done: Promise<void> }[] = [];
  const extraPools: Pool[] = [];
  const extraDatabases: TestDatabase[] = [];

  beforeAll(async () => {
    bouncer = await startPgBouncer({ serverUrl: adminUrl(), poolSize: POOL_SIZE });
    pool = new Pool({ connectionString: bouncer.url(db.name), max: 12 });
    pool.on('error', () => undefined);
    queue = new Queue(pool);
    admin = new Admin(pool);
  });

  function start(worker: Worker): WorkerEvent[] {
    const events: WorkerEvent[] = [];
    worker.on((event) => events.push(event));
    workers.push({ worker, done: worker.run() });
    return events;
  }

  interface PoolRow {
    database: string;
    pool_mode: string;
    sv_active: string;
    sv_idle: string;
    sv_used: string;
    sv_tested: string;
    sv_login: string;
    cl_waiting: string;
  }

  // PgBouncer's admin console speaks only the simple query protocol, which a parameterless
  // query of node-postgres uses.
  async function showPools(): Promise<PoolRow[]> {
    const adminConsole = new Client({ connectionString: bouncer.adminUrl() });
    await adminConsole.connect();
    try {
      const { rows } = await adminConsole.query<PoolRow>('SHOW POOLS');
      return rows.filter((row) => row.database === db.name);
    } finally {
      await adminConsole.end();
    }
  }

  it('pools in transaction mode with fewer server connections than clients', async () => {
    // Many clients at once, each holding a transaction open for a moment.
    const clients = await Promise.all(Array.from({ length: 8 }, () => pool.connect()));
    try {
      await Promise.all(
        clients.map(async (client) => {
          await client.query('BEGIN');
          await client.query('SELECT pg_sleep(0.05)');
          await client.query('COMMIT');
        }),
      );
    } finally {
      for (const client of clients) client.release();
    }
    const pools = await showPools();
    expect(pools.length).toBeGreaterThan(0);
    for (const row of pools) {
      expect(row.pool_mode).toBe('transaction');
      const servers = ['sv_active', 'sv_idle', 'sv_used', 'sv_tested', 'sv_login'].reduce(
        (sum, key) => sum + Number(row[key as keyof PoolRow]),
        0,
      );
      expect(servers).toBeLessThanOrEqual(POOL_SIZE);
    }
  });

  it('installs the schema and reads its status through the pooler, also with two installers at once', async () => {
    const fresh = await createTestDatabase({ installSchema: false });
    extraDatabases.push(fresh);
    const freshPool = new Pool({ connectionString: bouncer.url(fresh.name), max: 4 });
    freshPool.on('error', () => undefined);
    extraPools.push(freshPool);

    await Promise.all([installSchema(freshPool), installSchema(freshPool)]);
    expect(await getSchemaStatus(freshPool)).toEqual({
      installed: SCHEMA_VERSION,
      expected: SCHEMA_VERSION,
      minimum: MIN_SCHEMA_VERSION,
      oldestClient: 4,
      upToDate: true,
      compatible: true,
    });
    const { rows } = await fresh.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_proc WHERE pronamespace = 'workhorse'::regnamespace AND proname = 'claim_many_v1'",
    );
    expect(rows[0].n).toBe(1);
  });

  it('enqueues inside a caller transaction that commits or rolls back', async () => {
    const client = await pool.connect();
    let kept: string;
    let dropped: string;
    try {
      await client.query('BEGIN');
      kept = await queue.enqueue('bounce.tx', { keep: true }, { queue: 'bounce-tx' }, client);
      await client.query('COMMIT');
      await client.query('BEGIN');
      dropped = await queue.enqueue('bounce.tx', { keep: false }, { queue: 'bounce-tx' }, client);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect((await admin.getJob(kept))?.state).toBe('ready');
    expect(await admin.getJob(dropped)).toBeNull();
    await admin.cancel(kept);
  });

  it('runs 200 jobs with checkpoints, retries, heartbeats and a cancel on a polling worker (listen: false)', async () => {
    const q = 'bounce-main';
    const JOBS = 200;
    const checkpointRuns = new Map<string, number>();
    const countRun = (key: string): void => {
      checkpointRuns.set(key, (checkpointRuns.get(key) ?? 0) + 1);
    };

    // Half in one caller transaction as a batch, half one by one on the pool.
    const requests: EnqueueRequest[] = Array.from({ length: JOBS / 2 }, (_, i) => ({
      type: 'bounce.work',
      payload: { n: i },
      queue: q,
      retryPolicy: { kind: 'fixed', delayMs: 0 },
    }));
    const client = await pool.connect();
    const ids: string[] = [];
    try {
      await client.query('BEGIN');
      ids.push(...(await queue.enqueueMany(requests, client)));
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    for (let n = JOBS / 2; n < JOBS; n++) {
      ids.push(await queue.enqueue('bounce.work', { n }, { queue: q, retryPolicy: { kind: 'fixed', delayMs: 0 } }));
    }
    // Jobs that outlive several heartbeat rounds, and one that is canceled while it runs.
    const slowIds = await queue.enqueueMany(
      [0, 1, 2].map((i) => ({ type: 'bounce.slow', payload: { i }, queue: q })),
    );
    const cancelId = await queue.enqueue('bounce.cancel', {}, { queue: q });

    const worker = new Worker(queue, {
      queues: [q],
      concurrency: 10,
      leaseMs: 5000,
      heartbeatMs: 200,
      pollMs: 20,
      tickMs: 200,
      listen: false,
    })
      .handle('bounce.work', async (payload: { n: number }, ctx) => {
        const doubled = await ctx.checkpoint('double', () => {
          countRun(`${payload.n}:double`);
          return payload.n * 2;
        });
        const squared = await ctx.checkpoint('square', async () => {
          countRun(`${payload.n}:square`);
          return payload.n * payload.n;
        });
        // Every tenth job fails once after its checkpoints: the retry must replay them.
        if (payload.n % 10 === 0 && ctx.attempt === 1) throw new Error(`planned failure of ${payload.n}`);
        return { n: payload.n, doubled, squared, attempt: ctx.attempt };
      })
      .handle('bounce.slow', async (_payload, ctx) => {
        // Wait (by the database's own record, read directly) until a heartbeat through the
        // pooler has renewed this lease.
        await waitFor(
          async () => {
            const { rows } = await db.pool.query<{ renewed: boolean }>(
              'SELECT heartbeat_at > attempt_started_at AS renewed FROM workhorse.job_runtime WHERE job_id = $1',
              [ctx.jobId],
            );
            return rows[0]?.renewed === true;
          },
          15_000,
          `a heartbeat of ${ctx.jobId}`,
        );
        return 'renewed';
      })
      .handle('bounce.cancel', async (_payload, ctx) => {
        await new Promise<void>((resolve) => {
          if (ctx.signal.aborted) resolve();
          ctx.signal.addEventListener('abort', () => resolve(), { once: true });
        });
        throw ctx.signal.reason;
      });
    const events = start(worker);

    await waitFor(async () => (await admin.getJob(cancelId))?.state === 'active', 20_000, 'the cancel job to run');
    expect(await admin.cancel(cancelId, { reason: 'through the pooler' })).toBe('cancel_requested');

    const all = [...ids, ...slowIds, cancelId];
    await waitFor(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM workhorse.job_outcome WHERE job_id = ANY ($1::uuid[])',
          [all],
        );
        return rows[0].n === all.length;
      },
      60_000,
      'every job to end',
    );
    await worker.stop();

    expect(events.filter((e) => e.name === 'worker.error')).toEqual([]);
    expect(events.filter((e) => e.name === 'job.retry_scheduled')).toHaveLength(JOBS / 10);
    expect(events.filter((e) => e.name === 'job.lease_lost')).toEqual([]);

    // Admin reads through the pooler: page through the queue, newest first.
    const seen: JobSnapshot[] = [];
    let cursor: string | undefined;
    do {
      const page = await admin.listJobs({ queue: q, limit: 50, cursor });
      seen.push(...page.items);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(seen.map((j) => j.id).sort()).toEqual([...all].sort());

    const byId = new Map(seen.map((j) => [j.id, j]));
    for (const [i, id] of ids.entries()) {
      const job = byId.get(id) as JobSnapshot;
      expect(job.state).toBe('succeeded');
      const retried = i % 10 === 0;
      expect(job.result).toEqual({ n: i, doubled: i * 2, squared: i * i, attempt: retried ? 2 : 1 });
      expect(job.currentAttempt).toBe(retried ? 2 : 1);
      // Each stage ran once per job, retries included: the retry replayed the stored values.
      expect(checkpointRuns.get(`${i}:double`)).toBe(1);
      expect(checkpointRuns.get(`${i}:square`)).toBe(1);
    }
    for (const id of slowIds) expect(byId.get(id)).toMatchObject({ state: 'succeeded', result: 'renewed' });
    expect(byId.get(cancelId)).toMatchObject({ state: 'canceled', error: { name: 'Canceled', message: 'through the pooler' } });

    const timeline = await admin.getJobTimeline(ids[0], { limit: 3 });
    const entries = [...timeline.items];
    for (let next = timeline.nextCursor; next; ) {
      const page = await admin.getJobTimeline(ids[0], { limit: 3, cursor: next });
      entries.push(...page.items);
      next = page.nextCursor;
    }
    const kinds = entries.map((e) => `${e.source}:${e.kind}`);
    expect(kinds.slice(0, 7)).toEqual([
      'event:enqueued',
      'event:claimed',
      'event:checkpoint_saved',
      'event:checkpoint_saved',
      'attempt:failed',
      'event:retry_scheduled',
      'event:claimed',
    ]);
    // complete_many_v1 writes the closing attempt and the terminal event in one statement (two
    // CTEs), so their relative order is not defined.
    expect(kinds.slice(7).sort()).toEqual(['attempt:succeeded', 'event:succeeded']);
    const { rows: stored } = await pool.query<{ name: string; value: number }>(
      'SELECT name, value FROM workhorse.read_checkpoints_v1($1) ORDER BY name',
      [ids[7]],
    );
    expect(stored).toEqual([
      { name: 'double', value: 14 },
      { name: 'square', value: 49 },
    ]);
  });

  it('promotes due jobs and recovers expired leases with tick_v1 through the pooler', async () => {
    const q = 'bounce-tick';
    const later = await queue.enqueue('bounce.tick', { later: true }, { queue: q, runAt: new Date(Date.now() + 3_600_000) });
    // Time is simulated: the job's due time is moved into the past instead of waiting an hour.
    await db.pool.query("UPDATE workhorse.job_runtime SET run_at = clock_timestamp() - interval '1 second' WHERE job_id = $1", [later]);
    await pool.query('SELECT workhorse.tick_v1()');
    expect((await admin.getJob(later))?.state).toBe('ready');

    const claimed = await claim(pool, q, { workerId: 'bounce-crashed-worker', leaseMs: 1000 });
    expect(claimed.map((c) => c.jobId)).toEqual([later]);
    // The lease runs out without waiting for it (this is about the protocol, not timing).
    await forceExpire(db.pool, later);
    const { rows: ticks } = await pool.query<{ tick: { skipped: boolean; recovered: number } }>('SELECT workhorse.tick_v1() AS tick');
    expect(ticks[0].tick).toMatchObject({ skipped: false, recovered: 1 });
    expect(await admin.getJob(later)).toMatchObject({ state: 'ready', currentAttempt: 1, error: { name: 'LeaseExpired' } });

    // The old owner's writes are refused (its heartbeat and completion are stale).
    const { rows: beats } = await pool.query<{ status: string }>(
      'SELECT status FROM workhorse.heartbeat_many_v1($1, $2::jsonb, $3)',
      ['bounce-crashed-worker', JSON.stringify([{ jobId: later, fence: Number(claimed[0].fence) }]), 1000],
    );
    expect(beats.map((b) => b.status)).toEqual(['stale']);
    expect(await admin.cancel(later)).toBe('canceled');
  });

  it('wakes on NOTIFY when LISTEN goes straight to the server while everything else uses the pooler', async () => {
    const q = 'bounce-listen';
    // A poll interval far beyond the test's deadlines: only a notification can wake this worker.
    const worker = new Worker(queue, {
      queues: [q],
      concurrency: 2,
      pollMs: 300_000,
      tickMs: 60_000,
      listen: { connectionString: db.url },
    }).handle('bounce.listen', async (payload: { n: number }) => payload.n);
    const events = start(worker);

    // The listener is connected (directly: PgBouncer would not keep a LISTEN session) ...
    await waitFor(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND query = 'LISTEN workhorse_jobs' AND state = 'idle'",
          [db.name],
        );
        return rows[0].n === 1;
      },
      15_000,
      'the LISTEN connection',
    );
    // ... and the claims the worker makes at start and on connecting have finished, so the
    // next claim can only come from a notification.
    await waitFor(
      async () => {
        const pools = await showPools();
        return pools.every((row) => Number(row.sv_active) === 0 && Number(row.cl_waiting) === 0);
      },
      15_000,
      'the worker to go idle',
    );
    const id = await queue.enqueue('bounce.listen', { n: 42 }, { queue: q });
    await waitFor(async () => (await admin.getJob(id))?.state === 'succeeded', 20_000, 'the notified job to succeed');
    expect((await admin.getJob(id))?.result).toBe(42);
    expect(events.filter((e) => e.name === 'worker.error')).toEqual([]);
  });
});
