/**
 * Issue 29, items 3 and 4: nothing is lost on upgrade, and deploys can roll.
 *
 * The baseline release (schema version 4, commit a46ad78) is extracted from git history and its
 * own client runs in child processes (test/fixtures/release-worker.ts loads whichever lib/core
 * it is given). The database is installed by the baseline, filled by the baseline with jobs in
 * every state, and migrated by this package while the baseline worker keeps running; then every
 * job finishes exactly once, timelines keep their earlier events, the schedule fires once per
 * occurrence and dead letters redrive. Then an old and a new worker share a queue under load
 * while one of them is SIGKILLed, and every job has exactly one outcome.
 */
import { join, resolve } from 'node:path';
import type { Pool } from 'pg';
import { Admin, Queue, SCHEMA_VERSION } from '../../lib/core';
import { BASELINE_VERSION, extractBaseline, type BaselineCheckout } from '../support/baseline';
import { FixtureProcesses, waitForLine, type FixtureProcess } from '../support/fixture-process';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';
import { installSchema } from '../../lib/core/schema';

interface TimelineRow {
  id: string;
  source: string;
  kind: string;
  attempt: number | null;
  data: unknown;
}

const FIXTURE = resolve(__dirname, '..', 'fixtures', 'release-worker.ts');
const CURRENT_LIB = resolve(__dirname, '..', '..', 'lib', 'core');

const children = new FixtureProcesses();
let baseline: BaselineCheckout;

beforeAll(() => {
  baseline = extractBaseline();
});

afterAll(async () => {
  await children.killAll();
  baseline?.remove();
});

function startWorker(release: 'old' | 'new', url: string, workerId: string, queues: string[], extra: Record<string, string> = {}): FixtureProcess {
  return children.start(FIXTURE, {
    RELEASE_LIB: release === 'old' ? join(baseline.dir, 'lib', 'core') : CURRENT_LIB,
    RELEASE_DATABASE_URL: url,
    RELEASE_WORKER_ID: workerId,
    RELEASE_QUEUES: queues.join(','),
    ...extra,
  });
}

async function version(pool: Pool): Promise<number> {
  return (await pool.query<{ version: number }>('SELECT version FROM workhorse.schema_version')).rows[0].version;
}

/** Per job: how many outcome rows, its final state, and how many times a handler ran it to the end. */
async function accounting(pool: Pool): Promise<{ id: string; type: string; outcomes: number; state: string | null; runs: number; live: boolean }[]> {
  const { rows } = await pool.query<{ id: string; type: string; outcomes: number; state: string | null; runs: number; live: boolean }>(
    `SELECT j.id, j.type,
            (SELECT count(*)::int FROM workhorse.job_outcome o WHERE o.job_id = j.id) AS outcomes,
            (SELECT o.state FROM workhorse.job_outcome o WHERE o.job_id = j.id) AS state,
            (SELECT count(*)::int FROM public.side_effects s WHERE s.job_id = j.id AND s.stage = 'run') AS runs,
            EXISTS (SELECT 1 FROM workhorse.job_runtime r WHERE r.job_id = j.id) AS live
     FROM workhorse.job j ORDER BY j.seq`,
  );
  return rows;
}

describe('an upgrade from the baseline with jobs in every state, while the baseline worker runs', () => {
  const { db, pool } = useTestDatabase({ installSchema: false, beforeDrop: () => children.killAll() });
  const queue = new Queue(pool);
  const admin = new Admin(pool);

  it('loses nothing: every job finishes once, timelines keep their events, the schedule fires once per occurrence, dead letters redrive', async () => {
    // Installed and filled by the baseline's own client, whose worker then runs on.
    const worker = startWorker('old', db.url, 'old-1', ['upgrade', 'limited'], { RELEASE_INSTALL: '1', RELEASE_FILL: '1' });
    const filled = JSON.parse((await waitForLine(worker, 'FILLED ', 60_000)).slice('FILLED '.length)) as Record<string, string> & {
      ready: string[];
      finishedEarly: string[];
    };
    const { limitedHold, ready, finishedEarly, hold, scheduled, sleeper, afterHold, parent, signal, human, dead } = filled;
    expect(await version(pool)).toBe(BASELINE_VERSION);

    const live = (sql: string, values: unknown[]) => async () => (await pool.query(sql, values)).rowCount === 1;
    const runtime = (id: string, where: string) => live(`SELECT 1 FROM workhorse.job_runtime WHERE job_id = $1 AND ${where}`, [id]);
    await waitFor(
      async () =>
        (await runtime(hold, "state = 'active'")()) &&
        (await runtime(limitedHold, "state = 'active'")()) &&
        (await runtime(sleeper, "state = 'scheduled' AND resuming")()) &&
        (await runtime(afterHold, "state = 'blocked'")()) &&
        (await runtime(parent, "state = 'blocked'")()) &&
        (await live("SELECT 1 FROM workhorse.job_signal_wait WHERE job_id = $1 AND status = 'open'", [signal])()) &&
        (await live("SELECT 1 FROM workhorse.job_human_wait WHERE job_id = $1 AND status = 'open'", [human])()) &&
        (await live("SELECT 1 FROM workhorse.job_outcome WHERE job_id = $1 AND state = 'failed'", [dead])()) &&
        (await live("SELECT count(*) FROM workhorse.job_outcome WHERE job_id = ANY($1) HAVING count(*) = 6", [finishedEarly])()) &&
        (await live("SELECT 1 FROM workhorse.schedule_occurrence WHERE state = 'fired' LIMIT 1", [])()),
      30_000,
      'the baseline to hold jobs in every state',
    );
    for (const id of ready) expect((await pool.query('SELECT state FROM workhorse.job_runtime WHERE job_id = $1', [id])).rows).toEqual([{ state: 'ready' }]);
    expect((await pool.query('SELECT state FROM workhorse.job_runtime WHERE job_id = $1', [scheduled])).rows).toEqual([{ state: 'scheduled' }]);
    expect((await pool.query("SELECT count(*)::int AS n FROM workhorse.schedule_occurrence WHERE state = 'planned'")).rows[0].n).toBeGreaterThan(0);

    // History across several day partitions: the early jobs' rows moved to the two days before.
    for (const day of [1, 2]) {
      await pool.query(
        `SELECT workhorse.ensure_history_partition('job_event', 'at', (current_date - $1::int)),
                workhorse.ensure_history_partition('attempt_history', 'finished_at', (current_date - $1::int))`,
        [day],
      );
      const ids = finishedEarly.slice((day - 1) * 3, day * 3);
      await pool.query("UPDATE workhorse.job_event SET at = at - $2::int * interval '1 day' WHERE job_id = ANY($1)", [ids, day]);
      await pool.query("UPDATE workhorse.attempt_history SET finished_at = finished_at - $2::int * interval '1 day', started_at = started_at - $2::int * interval '1 day' WHERE job_id = ANY($1)", [ids, day]);
    }
    const historyParts = await pool.query<{ part: string }>('SELECT DISTINCT tableoid::regclass::text AS part FROM workhorse.job_event WHERE job_id = ANY($1) ORDER BY 1', [finishedEarly]);
    expect(historyParts.rows).toHaveLength(2);

    // Read through get_timeline_v1, which the baseline has and the migrated schema keeps (this
    // release's Admin needs the current schema: its listings' cursors are made by the database).
    const timelines = async (ids: string[]): Promise<Map<string, TimelineRow[]>> =>
      new Map(
        await Promise.all(
          ids.map(async (id) => [id, (await pool.query<TimelineRow>('SELECT id, source, kind, attempt, data FROM workhorse.get_timeline_v1($1, 0, 1000)', [id])).rows] as const),
        ),
      );
    const allIds = (await pool.query<{ id: string }>('SELECT id FROM workhorse.job')).rows.map((r) => r.id);
    const before = await timelines(allIds);

    // The migration, while the baseline worker holds leases, sleeps, waits and ticks.
    const migratedAt = new Date();
    await expect(installSchema(pool)).resolves.toMatchObject({ from: BASELINE_VERSION, to: SCHEMA_VERSION });
    expect(await version(pool)).toBe(SCHEMA_VERSION);

    // Everything goes on, through the running baseline worker and this release's client.
    await pool.query('INSERT INTO public.gate VALUES (true)');
    await expect(queue.sendSignal(signal, 'go', { sent: 'after the upgrade' })).resolves.toBe('delivered');
    await expect(queue.completeHumanWait(human, 'approve', 'yes', { actor: 'ops' })).resolves.toBe('completed');
    const redriven = await admin.redrive(dead, { requestId: 'upgrade-redrive' });
    await waitFor(
      async () => (await pool.query("SELECT 1 FROM workhorse.schedule_occurrence WHERE state = 'fired' AND at > $1::timestamptz + interval '2 seconds'", [migratedAt])).rowCount! > 0,
      30_000,
      'the schedule to fire after the upgrade',
    );
    await queue.syncSchedules('upgrade', []);
    await waitFor(
      async () => (await pool.query('SELECT 1 FROM workhorse.job_runtime')).rowCount === 0,
      45_000,
      'every job to finish',
    );
    expect(worker.process.exitCode).toBeNull();
    expect(worker.stderr.join('')).toBe('');

    // Every job has exactly one outcome; each ran to the end once (the dead letter never did).
    const jobs = await accounting(pool);
    expect(jobs.filter((j) => j.outcomes !== 1 || j.live)).toEqual([]);
    expect(jobs.filter((j) => j.id !== dead && (j.state !== 'succeeded' || j.runs !== 1))).toEqual([]);
    expect(jobs.find((j) => j.id === dead)).toMatchObject({ state: 'failed', runs: 0 });
    expect(jobs.find((j) => j.id === redriven)).toMatchObject({ state: 'succeeded', runs: 1 });
    expect((await admin.getJob(signal))?.result).toEqual({ sent: 'after the upgrade' });
    expect((await admin.getJob(human))?.result).toBe('yes');
    expect((await admin.getJob(parent))?.result).toBe(2);

    // Timelines keep every earlier event, in order, ahead of the new ones.
    const after = await timelines(allIds);
    for (const [id, entries] of before) {
      const kept = after.get(id)!.slice(0, entries.length);
      expect([id, kept]).toEqual([id, entries]);
      // This release's Admin reads the same history.
      expect([id, (await admin.getJobTimeline(id, { limit: 1000 })).items.map((e) => e.id)]).toEqual([id, after.get(id)!.map((e) => e.id)]);
    }

    // The schedule fired each occurrence once, before and after the upgrade, each job ran once.
    const fired = await pool.query<{ at: Date; job_id: string }>(
      "SELECT at, job_id FROM workhorse.schedule_occurrence WHERE state = 'fired' ORDER BY at",
    );
    expect(fired.rows.some((o) => o.at < migratedAt)).toBe(true);
    expect(fired.rows.some((o) => o.at > migratedAt)).toBe(true);
    expect(new Set(fired.rows.map((o) => o.job_id)).size).toBe(fired.rows.length);
    const tickJobs = jobs.filter((j) => j.type === 'up.tick');
    expect(tickJobs.map((j) => j.id).sort()).toEqual(fired.rows.map((o) => o.job_id).sort());
    // One occurrence per second, none skipped, none twice.
    const seconds = fired.rows.map((o) => Math.round(o.at.getTime() / 1000));
    expect(seconds).toEqual(Array.from({ length: seconds.length }, (_, i) => seconds[0] + i));

    // The queue policy is kept.
    expect((await admin.listQueues()).find((q) => q.queue === 'limited')).toMatchObject({ concurrency: 1 });
  }, 150_000);
});

describe('a rolling deploy: the old and the new release side by side under load, one SIGKILLed', () => {
  const { db, pool } = useTestDatabase({ installSchema: false, beforeDrop: () => children.killAll() });
  const queue = new Queue(pool);

  it('gives every job exactly one outcome, whichever release enqueued or ran it', async () => {
    const lease = { RELEASE_LEASE_MS: '1500' };
    // The old release installs and runs; then the schema is migrated under it.
    const old = startWorker('old', db.url, 'old-1', ['roll'], { RELEASE_INSTALL: '1', ...lease });
    await waitForLine(old, 'STARTED', 60_000);
    await expect(installSchema(pool)).resolves.toMatchObject({ from: BASELINE_VERSION, to: SCHEMA_VERSION });
    // The baseline's one-time trap (docs/upgrading.md): its workers check for version 4 exactly,
    // so one started after the migration is refused; the one already running goes on.
    const late = startWorker('old', db.url, 'old-late', ['roll'], lease);
    await late.exited;
    expect(late.process.exitCode).toBe(1);
    expect(late.stderr.join('')).toMatch(new RegExp(`SchemaVersionMismatchError: The workhorse schema in this database is version ${SCHEMA_VERSION}, but this package needs version 4`));
    const fresh = startWorker('new', db.url, 'new-1', ['roll'], lease);
    await waitForLine(fresh, 'STARTED', 60_000);

    // Load from both releases at once: an old producer process (started after the migration:
    // the baseline's Queue does not check the version) and this release's Queue.
    const producer = startWorker('old', db.url, 'old-producer', ['unused'], { RELEASE_ENQUEUE: '300:roll', RELEASE_NO_WORKER: '1' });
    const newIds: string[] = [];
    for (let from = 0; from < 300; from += 50) {
      newIds.push(...(await queue.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ type: 'up.count', payload: { n: from + i, release: 'new' }, queue: 'roll' })))));
    }
    await waitForLine(producer, 'ENQUEUED 300', 60_000);
    await producer.exited;
    expect(producer.process.exitCode).toBe(0);

    // The old worker dies mid-run, holding leases.
    await waitFor(
      async () =>
        (await pool.query("SELECT 1 FROM workhorse.job_runtime WHERE worker_id = 'old-1' AND state = 'active'")).rowCount! > 0 &&
        (await pool.query('SELECT count(*)::int AS n FROM workhorse.job_outcome')).rows[0].n >= 100,
      60_000,
      'both releases to be running jobs',
    );
    old.process.kill('SIGKILL');
    await old.exited;

    await waitFor(
      async () => (await pool.query('SELECT count(*)::int AS n FROM workhorse.job_outcome')).rows[0].n === 600 && true,
      90_000,
      'the new worker to finish every job, the dead worker\'s too',
    );
    const jobs = await accounting(pool);
    expect(jobs).toHaveLength(600);
    expect(jobs.filter((j) => j.outcomes !== 1 || j.live || j.state !== 'succeeded' || j.runs < 1)).toEqual([]);
    expect(newIds.every((id) => jobs.some((j) => j.id === id))).toBe(true);
    // A job that ran twice was the dead worker's: its lease expired and the new worker ran it again.
    const rerun = jobs.filter((j) => j.runs > 1).map((j) => j.id);
    const expired = await pool.query<{ job_id: string }>(
      "SELECT DISTINCT job_id FROM workhorse.attempt_history WHERE worker_id = 'old-1' AND outcome <> 'succeeded'",
    );
    expect(rerun.filter((id) => !expired.rows.some((r) => r.job_id === id))).toEqual([]);
    // Both releases completed jobs, each exactly once in the attempt history.
    const succeeded = await pool.query<{ worker_id: string; n: number; jobs: number }>(
      "SELECT worker_id, count(*)::int AS n, count(DISTINCT job_id)::int AS jobs FROM workhorse.attempt_history WHERE outcome = 'succeeded' GROUP BY worker_id ORDER BY worker_id",
    );
    expect(succeeded.rows.map((r) => r.worker_id)).toEqual(['new-1', 'old-1']);
    expect(succeeded.rows.reduce((total, r) => total + r.n, 0)).toBe(600);
    expect(succeeded.rows.every((r) => r.n === r.jobs)).toBe(true);
    expect(fresh.stderr.join('')).toBe('');
  }, 150_000);
});
