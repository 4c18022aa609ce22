/**
 * Retention: finished jobs go (with every row of theirs) once their window has passed, live jobs
 * and redrive sources of live jobs stay; expired history partitions are dropped, and a drop that
 * cannot get its lock gives up quickly instead of stalling writers; the maintenance tick applies
 * the policy; the policy is checked by name; `workhorse retention status|run`.
 */
import { Worker, WorkhorseValidationError, type RetentionRun } from '../../lib/core';
import { cli, documentOf, viaJson } from '../cli/cli-harness';
import { claimOne, complete, fail } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { db, pool, queue, admin } = useTestDatabase({ scope: 'test' });

async function rowsOf(jobId: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<Record<string, number>>(
    `SELECT (SELECT count(*)::int FROM workhorse.job WHERE id = $1) AS job,
            (SELECT count(*)::int FROM workhorse.job_outcome WHERE job_id = $1) AS outcome,
            (SELECT count(*)::int FROM workhorse.job_query WHERE job_id = $1) AS query,
            (SELECT count(*)::int FROM workhorse.job_checkpoint WHERE job_id = $1) AS checkpoints,
            (SELECT count(*)::int FROM workhorse.job_redrive WHERE source_job_id = $1 OR new_job_id = $1) AS redrives`,
    [jobId],
  );
  return rows[0];
}

const GONE = { job: 0, outcome: 0, query: 0, checkpoints: 0, redrives: 0 };

it('has documented defaults, and setRetention changes only what it is given, refusing bad settings by name', async () => {
  expect((await admin.retentionStatus()).policy).toMatchObject({ enabled: true, jobEventDays: 14, attemptHistoryDays: 14, finishedJobMs: 2_592_000_000 });
  await admin.setRetention({ jobEventDays: 3 }, { actor: 'alice' });
  expect((await admin.retentionStatus()).policy).toMatchObject({ jobEventDays: 3, attemptHistoryDays: 14, changedBy: 'alice' });
  const bad: [object, string][] = [
    [{ finishedJobMs: 10 }, 'finishedJobMs'],
    [{ jobEventDays: 0 }, 'jobEventDays'],
    [{ enabled: 'yes' }, 'enabled'],
    [{ keepForever: true }, 'keepForever'],
  ];
  for (const [policy, field] of bad) {
    const error = await admin.setRetention(policy).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    expect((error as WorkhorseValidationError).field).toBe(field);
  }
});

it('removes finished jobs with all their rows once their window passed; keeps live jobs, and the redrive source while its new job is live', async () => {
  await admin.setRetention({ finishedJobMs: 1000 });
  const [done, dead, live, source] = await queue.enqueueMany(
    ['r-done', 'r-dead', 'r-live', 'r-source'].map((q) => ({ type: 't', payload: {}, queue: q, maxAttempts: 1 })),
  );
  const d = await claimOne(pool, 'r-done');
  await pool.query("INSERT INTO workhorse.job_checkpoint VALUES ($1, 'stage', '1', 1, $2, $3, clock_timestamp())", [done, d.fence, d.workerId]);
  await complete(pool, d, { ok: true });
  await fail(pool, await claimOne(pool, 'r-dead'), { name: 'Boom', message: 'boom' });
  await fail(pool, await claimOne(pool, 'r-source'), { name: 'Boom', message: 'boom' });
  const redriven = await admin.redrive(source, { requestId: 'again' });

  const run = async (): Promise<RetentionRun> => admin.runRetention();
  await waitFor(async () => (await run(), (await rowsOf(done)).job + (await rowsOf(dead)).job === 0), 10_000, 'the finished jobs to be removed');
  expect(await rowsOf(done)).toEqual(GONE);
  expect(await rowsOf(dead)).toEqual(GONE);
  expect(await admin.getJob(done)).toBeNull();
  expect((await admin.getJob(live))?.state).toBe('ready');
  // The source stays while the job it was redriven into is live, lineage and all: once past its
  // window, it is looked at and put off again.
  const putOff = async () =>
    (await pool.query(
      `SELECT 1 FROM workhorse.retention_deferred d JOIN workhorse.job_outcome o USING (job_id)
       WHERE d.job_id = $1 AND d.recheck_at > o.finished_at + interval '1 second'`,
      [source],
    )).rowCount === 1;
  await waitFor(async () => (await run(), await putOff()), 10_000, 'the referenced source to be put off');
  expect((await admin.getJob(source))?.redrivenTo).toEqual([redriven]);
  expect((await admin.retentionStatus()).deferredJobs).toBeGreaterThanOrEqual(2);

  // Once the redriven job is finished (no longer live) and both are old enough, both go.
  await complete(pool, await claimOne(pool, 'r-source'));
  await waitFor(async () => (await run(), (await rowsOf(source)).job + (await rowsOf(redriven)).job === 0), 10_000, 'the redrive pair to be removed');
  expect(await rowsOf(source)).toEqual(GONE);
  expect(await rowsOf(redriven)).toEqual(GONE);
  expect((await admin.getJob(live))?.state).toBe('ready');
  const status = await admin.retentionStatus();
  expect(status.jobsPurged).toBe(4);
  expect(status.lagMs).toBeLessThan(5_000);
});

it('keeps a prerequisite while its dependent is live, then removes both with their links; a parent with its children', async () => {
  await admin.setRetention({ finishedJobMs: 1000 });
  const links = async (ids: string[]) =>
    (await pool.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM workhorse.job_dependency WHERE prerequisite_id = ANY ($1) OR dependent_id = ANY ($1))
            + (SELECT count(*) FROM workhorse.job_child_call WHERE parent_id = ANY ($1)) AS n`,
      [ids],
    )).rows[0].n;
  const pre = await queue.enqueue('t', {}, { queue: 'r-pre' });
  const dependent = await queue.enqueue('t', {}, { queue: 'r-dependent', dependsOn: [pre] });
  await complete(pool, await claimOne(pool, 'r-pre'), { value: 7 });
  // Past the window, the prerequisite is looked at and put off while its dependent is live.
  await pool.query('SELECT pg_sleep(1.1)');
  await admin.runRetention();
  expect((await rowsOf(pre)).job).toBe(1);
  expect((await admin.getJob(dependent))?.state).toBe('ready');
  await complete(pool, await claimOne(pool, 'r-dependent'), null);
  await waitFor(async () => (await admin.runRetention(), (await rowsOf(pre)).job + (await rowsOf(dependent)).job === 0), 15_000, 'both jobs to be removed');
  expect(Number(await links([pre, dependent]))).toBe(0);

  // A parent that started a child: both finish, then both go, with the record of the call.
  const worker = new Worker(queue, { queues: ['r-family'], pollMs: 50 })
    .handle('family.parent', async (_payload, ctx) => ctx.runChild('only', 'family.child', {}, { queue: 'r-family' }))
    .handle('family.child', async (_payload, ctx) => {
      // Signals and a human decision leave rows of their own, which go with the job too.
      await ctx.waitForSignal('go', { timeoutMs: 60_000 });
      await ctx.waitForHuman('approve', { context: {}, timeoutMs: 60_000 });
      return 5;
    });
  const parent = await queue.enqueue('family.parent', {}, { queue: 'r-family' });
  const running = worker.run();
  try {
    const childOf = async () => (await admin.getJob(parent))?.children?.[0]?.id;
    await waitFor(async () => (await childOf()) !== undefined, 20_000, 'the child to start');
    const started = (await childOf()) as string;
    await queue.sendSignal(started, 'go', { now: true });
    await waitFor(async () => (await admin.listHumanWaits({})).items.some((w) => w.jobId === started), 20_000, 'the human wait');
    await queue.completeHumanWait(started, 'approve', 'yes', { actor: 'alice' });
    await waitFor(async () => (await admin.getJob(parent))?.state === 'succeeded', 20_000, 'the parent to succeed');
  } finally {
    await worker.stop();
    await running;
  }
  const child = (await admin.getJob(parent))?.children?.[0]?.id;
  expect(child).toBeDefined();
  await waitFor(async () => (await admin.runRetention(), (await rowsOf(parent)).job + (await rowsOf(child as string)).job === 0), 15_000, 'the parent and child to be removed');
  expect(Number(await links([parent, child as string]))).toBe(0);
});

it('the maintenance tick applies the policy', async () => {
  await admin.setRetention({ finishedJobMs: 1000 });
  const id = await queue.enqueue('t', {}, { queue: 'tick-r' });
  await complete(pool, await claimOne(pool, 'tick-r'));
  await waitFor(async () => {
    await pool.query('SELECT workhorse.tick_v1()');
    return (await rowsOf(id)).job === 0;
  }, 30_000, 'a tick to remove the finished job (an idle retention looks again within 10 s)');
});

async function dayPartition(table: string, daysAgo: number): Promise<string> {
  const { rows } = await pool.query<{ day: string }>(
    "SELECT to_char((clock_timestamp() AT TIME ZONE 'UTC')::date - $1::int, 'YYYY-MM-DD') AS day",
    [daysAgo],
  );
  await pool.query(`SELECT workhorse.ensure_history_partition($1, $2, $3::date)`, [table, table === 'job_event' ? 'at' : 'finished_at', rows[0].day]);
  return `${table}_p${rows[0].day.replaceAll('-', '')}`;
}

async function exists(name: string): Promise<boolean> {
  const { rows } = await pool.query<{ found: boolean }>("SELECT to_regclass('workhorse.' || $1) IS NOT NULL AS found", [name]);
  return rows[0].found;
}

it('drops history partitions past their window, and gives up quickly on a drop whose lock is held', async () => {
  const oldEvents = await dayPartition('job_event', 20);
  const keptEvents = await dayPartition('job_event', 10);
  const oldAttempts = await dayPartition('attempt_history', 20);
  expect((await admin.retentionStatus()).expiredPartitions).toBe(2);

  // A transaction that wrote an event holds a lock on job_event until it ends.
  const holder = await pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query("INSERT INTO workhorse.job_event (job_id, at, kind) VALUES (gen_random_uuid(), clock_timestamp(), 'test')");
    const started = Date.now();
    const blocked = await admin.runRetention();
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(blocked).toMatchObject({ skipped: false, partitionsDropped: 1, lockTimeouts: 1 });
    expect(await exists(oldEvents)).toBe(true);
    expect(await exists(oldAttempts)).toBe(false);
  } finally {
    await holder.query('ROLLBACK');
    holder.release();
  }
  expect(await admin.runRetention()).toMatchObject({ partitionsDropped: 1, lockTimeouts: 0 });
  expect(await exists(oldEvents)).toBe(false);
  expect(await exists(keptEvents)).toBe(true);
  const status = await admin.retentionStatus();
  expect(status).toMatchObject({ expiredPartitions: 0, partitionsDropped: 2, lockTimeouts: 1 });
});

it('workhorse retention status and run', async () => {
  const env = { DATABASE_URL: db.url };
  expect(documentOf(await cli(['retention', 'status', '--json'], env))).toEqual(viaJson(await admin.retentionStatus()));
  const text = await cli(['retention', 'status'], env);
  expect(text.stdout).toMatch(/^enabled +yes\njob events +14 days/);
  const run = await cli(['retention', 'run', '--budget', '10'], env);
  expect(run).toMatchObject({ code: 0, stderr: '' });
  expect(run.stdout).toMatch(/^Removed 0 finished job\(s\) of 0 looked at, dropped 0 partition\(s\)\.\n$/);
  expect((await cli(['retention', 'run', '--budget', 'all'], env)).code).toBe(2);
  await admin.setRetention({ enabled: false });
  expect(documentOf(await cli(['retention', 'run', '--json'], env))).toEqual({ skipped: true, disabled: true });
});
