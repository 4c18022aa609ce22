/**
 * admin.health(): what each reason reports and when, the levels under user thresholds, bad
 * thresholds refused by name; and `workhorse health`, whose exit code follows the level.
 */
import { WorkhorseValidationError, type HealthReport } from '../../lib/core';
import { cli, documentOf } from '../cli/cli-harness';
import { claimOne, fail } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

const { db, pool, queue, admin } = useTestDatabase({ scope: 'test' });

const codes = (report: HealthReport) => report.reasons.map((r) => `${r.level}:${r.code}:${r.queue ?? '-'}`);

it('an idle database is ok, with nothing to report', async () => {
  const report = await admin.health();
  expect(report).toMatchObject({
    status: 'ok',
    reasons: [],
    queues: [],
    workers: { running: 0, draining: 0, gone: 0 },
    retention: { enabled: true },
    missingPartitions: [],
  });
  expect(report.checkedAt).toBeInstanceOf(Date);
});

it('reports per queue the live jobs by state and the oldest ready wait; ready jobs without a running worker warn', async () => {
  await queue.enqueueMany([{ type: 't', payload: {}, queue: 'h1' }, { type: 't', payload: {}, queue: 'h1' }]);
  await queue.enqueue('t', {}, { queue: 'h2', runAt: new Date(Date.now() + 3_600_000) });
  await claimOne(pool, 'h1');
  const report = await admin.health();
  expect(report.queues).toEqual([
    { queue: 'h1', blocked: 0, scheduled: 0, ready: 1, active: 1, oldestReadyMs: expect.any(Number), expiredLeases: 0, failedLastHour: 0 },
    { queue: 'h2', blocked: 0, scheduled: 1, ready: 0, active: 0, oldestReadyMs: 0, expiredLeases: 0, failedLastHour: 0 },
  ]);
  expect(report.status).toBe('warn');
  expect(report.reasons).toEqual([{ code: 'ready_without_workers', level: 'warn', queue: null, value: 1, threshold: 1 }]);

  // Thresholds: a level left out keeps its default; null never fires.
  const strict = await admin.health({ oldestReadyMs: { critical: 0 }, readyWithoutWorkers: { warn: null } });
  expect(strict.status).toBe('critical');
  expect(codes(strict)).toEqual(['critical:oldest_ready_age:h1']);
  expect(strict.reasons[0].threshold).toBe(0);
});

it('reports leases that ran out over 10 s ago and were not recovered, and the dead letters of the last hour', async () => {
  const ids = await queue.enqueueMany(Array.from({ length: 3 }, () => ({ type: 't', payload: {}, queue: 'hx', maxAttempts: 1 })));
  const a = await claimOne(pool, 'hx');
  await pool.query("UPDATE workhorse.job_runtime SET lease_expires_at = clock_timestamp() - interval '11 seconds' WHERE job_id = $1", [a.jobId]);
  const b = await claimOne(pool, 'hx');
  await fail(pool, b, { name: 'Boom', message: 'boom' });
  const report = await admin.health({ readyWithoutWorkers: { warn: null }, failedLastHour: { warn: 1 } });
  expect(report.queues).toEqual([expect.objectContaining({ queue: 'hx', ready: 1, active: 1, expiredLeases: 1, failedLastHour: 1 })]);
  expect(codes(report)).toEqual(['warn:dead_letters:hx', 'warn:expired_leases:hx']);
  expect(report.status).toBe('warn');
  expect(ids).toHaveLength(3);
});

it('reports missing history partitions of today and tomorrow', async () => {
  const { rows } = await pool.query<{ name: string }>(
    "SELECT 'job_event_p' || to_char((clock_timestamp() AT TIME ZONE 'UTC')::date + 1, 'YYYYMMDD') AS name",
  );
  await pool.query(`DROP TABLE workhorse.${rows[0].name}`);
  const report = await admin.health();
  expect(report.missingPartitions).toEqual([rows[0].name]);
  expect(report.reasons).toEqual([{ code: 'partitions_missing', level: 'warn', queue: null, value: 1, threshold: 1 }]);
});

it('refuses bad thresholds, naming the field, before asking the database', async () => {
  const bad: [unknown, string][] = [
    [{ oldestReadyMs: { warn: -1 } }, 'thresholds.oldestReadyMs.warn'],
    [{ oldestReadyMs: { severe: 1 } }, 'thresholds.oldestReadyMs.severe'],
    [{ latency: { warn: 1 } }, 'thresholds.latency'],
    [{ expiredLeases: 3 }, 'thresholds.expiredLeases'],
  ];
  for (const [thresholds, field] of bad) {
    const error = await admin.health(thresholds as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    expect((error as WorkhorseValidationError).field).toBe(field);
  }
});

it('workhorse health prints the report and exits 0 when ok, 4 on warn, 5 on critical', async () => {
  const env = { DATABASE_URL: db.url };
  const ok = await cli(['health', '--json'], env);
  expect(documentOf<HealthReport>(ok)).toMatchObject({ status: 'ok', reasons: [] });
  await queue.enqueue('t', {}, { queue: 'c1' });
  const warn = await cli(['health'], env);
  expect(warn.code).toBe(4);
  expect(warn.stdout).toMatch(/^Status: warn\n/);
  expect(warn.stdout).toMatch(/\nwarn +ready_without_workers +- +1 +1\n/);
  const critical = await cli(['health', '--json', '--threshold', 'oldestReadyMs.critical=0', '--threshold', 'readyWithoutWorkers.warn=null'], env);
  expect(critical.code).toBe(5);
  const report = JSON.parse(critical.stdout) as HealthReport;
  expect(report.reasons.map((r) => r.code)).toEqual(['oldest_ready_age']);
  expect(report.queues.map((q) => [q.queue, q.ready])).toEqual([['c1', 1]]);
  const usage = await cli(['health', '--threshold', 'oldestReadyMs=5'], env);
  expect(usage.code).toBe(2);
});
