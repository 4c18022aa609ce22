/**
 * Issue 30, defect 1: maintenance, schedule syncs and redrives serialise on rows of owner-only
 * tables, which no application role can lock, instead of advisory locks, which any connecting role
 * can take. A producer-only role holding every key the schema used to take stops nothing; it
 * cannot lock the rows that replaced them (no table privilege). And `health()` reports
 * maintenance that has not run for too long.
 */
import type { Client, Pool } from 'pg';
import { WorkhorseValidationError, type HealthThresholds } from '../../lib/core';
import { grantRole } from '../../lib/core/grants';
import { claimOne, fail } from '../support/protocol';
import { clientFor, sqlstateOf, type LoginRole } from '../support/roles';
import { useTestDatabase } from '../support/test-database';

const opened: { clients: Client[]; pools: Pool[] } = { clients: [], pools: [] };

const { db, pool, queue, admin, roles } = useTestDatabase({
  afterEachTest: async () => {
    for (const client of opened.clients.splice(0)) await client.end().catch(() => undefined);
  },
  beforeDrop: async () => {
    for (const client of opened.clients.splice(0)) await client.end().catch(() => undefined);
    for (const p of opened.pools.splice(0)) await p.end();
  },
});

let producer: LoginRole;
let operator: LoginRole;

beforeAll(async () => {
  producer = await roles.create(db.url, 'wh_producer');
  operator = await roles.create(db.url, 'wh_operator');
  await grantRole(db.pool, producer.name, 'producer');
  await grantRole(db.pool, operator.name, 'operator');
});

async function session(role: LoginRole): Promise<Client> {
  const client = await clientFor(role.url);
  opened.clients.push(client);
  // A call that waits for a lock fails the test instead of hanging it.
  await client.query("SET statement_timeout = '5s'");
  return client;
}

/** A producer-only session inside a transaction holding every advisory key the schema used. */
async function hostileProducer(keys: string): Promise<Client> {
  const hostile = await session(producer);
  await hostile.query('BEGIN');
  await hostile.query(`SELECT ${keys}`);
  return hostile;
}

it('a producer-only role holding the tick and retention keys stops neither, and cannot lock what they lock', async () => {
  const hostile = await hostileProducer('pg_advisory_xact_lock(7362515002), pg_advisory_xact_lock(7362515019)');
  const id = await queue.enqueue('t', {}, { queue: 'locks-tick', runAt: new Date(Date.now() + 100) });
  await new Promise((resolve) => setTimeout(resolve, 200));
  const ops = await session(operator);
  const { rows } = await ops.query<{ tick: { skipped: boolean; promoted: number } }>('SELECT workhorse.tick_v1() AS tick');
  expect(rows[0].tick).toMatchObject({ skipped: false, promoted: 1 });
  expect((await admin.getJob(id))?.state).toBe('ready');
  const retention = await ops.query<{ r: { skipped: boolean } }>('SELECT workhorse.retention_run_v1(10, true) AS r');
  expect(retention.rows[0].r.skipped).toBe(false);

  // The rows that replaced the keys are out of any application role's reach.
  await hostile.query('ROLLBACK');
  for (const table of ['maintenance_lock', 'retention_state', 'schedule_namespace']) {
    expect(await sqlstateOf(hostile, `SELECT 1 FROM workhorse.${table} FOR UPDATE SKIP LOCKED`)).toBe('42501');
    expect(await sqlstateOf(hostile, `SELECT 1 FROM workhorse.${table} FOR KEY SHARE`)).toBe('42501');
  }
});

it('a producer-only role holding the old namespace key does not make a schedule sync hang', async () => {
  const hostile = await hostileProducer("pg_advisory_xact_lock(7362515, hashtext('billing'))");
  const other = await session(producer);
  const definitions = [{ key: 'nightly', cron: '0 3 * * *', type: 'report', payload: {} }];
  const { rows } = await other.query<{ key: string; change: string }>(
    "SELECT key, change FROM workhorse.sync_schedules_v1('billing', $1::jsonb)",
    [JSON.stringify(definitions)],
  );
  expect(rows).toEqual([{ key: 'nightly', change: 'created' }]);
  await hostile.query('ROLLBACK');
});

it('two syncs of one namespace still take turns', async () => {
  const first = await session(producer);
  const second = await session(producer);
  const definitions = (cron: string) => JSON.stringify([{ key: 'k', cron, type: 'report', payload: {} }]);
  await first.query('BEGIN');
  await first.query("SELECT * FROM workhorse.sync_schedules_v1('turns', $1::jsonb)", [definitions('0 1 * * *')]);
  let secondDone = false;
  const waiting = second
    .query<{ change: string }>("SELECT change FROM workhorse.sync_schedules_v1('turns', $1::jsonb)", [definitions('0 2 * * *')])
    .then((result) => {
      secondDone = true;
      return result;
    });
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(secondDone).toBe(false);
  await first.query('COMMIT');
  expect((await waiting).rows).toEqual([{ change: 'updated' }]);
});

it('a producer-only role holding a redrive request key does not make the redrive hang', async () => {
  const id = await queue.enqueue('t', {}, { queue: 'locks-redrive', maxAttempts: 1 });
  const job = await claimOne(pool, 'locks-redrive');
  await fail(pool, job, { name: 'Boom', message: 'boom' });
  const hostile = await hostileProducer("pg_advisory_xact_lock(hashtextextended('workhorse.redrive:req-1', 0))");
  const ops = await session(operator);
  const { rows } = await ops.query<{ id: string }>("SELECT workhorse.redrive_v1($1, 'req-1') AS id", [id]);
  expect(rows[0].id).toEqual(expect.any(String));
  // Idempotent per request id as before.
  const again = await ops.query<{ id: string }>("SELECT workhorse.redrive_v1($1, 'req-1') AS id", [id]);
  expect(again.rows[0].id).toBe(rows[0].id);
  await hostile.query('ROLLBACK');
});

describe('health reports maintenance that has not run for too long', () => {
  // Earlier tests leave ready jobs and no worker runs here: that reason is not the subject.
  const healthOf = (thresholds: HealthThresholds = {}) => admin.health({ readyWithoutWorkers: { warn: null }, ...thresholds });

  it('a tick not run for over a minute warns, over 15 minutes is critical, and a tick clears it', async () => {
    await pool.query('SELECT workhorse.tick_v1()');
    expect((await healthOf()).reasons).toEqual([]);
    await pool.query("UPDATE workhorse.maintenance_lock SET last_run_at = clock_timestamp() - interval '2 minutes' WHERE name = 'tick'");
    const warn = await healthOf();
    expect(warn.status).toBe('warn');
    expect(warn.reasons).toEqual([{ code: 'maintenance_stale', level: 'warn', queue: null, value: expect.any(Number), threshold: 60_000 }]);
    expect(warn.reasons[0].value).toBeGreaterThanOrEqual(120_000);
    expect(warn.maintenance.tickLastRunAt).toBeInstanceOf(Date);

    await pool.query("UPDATE workhorse.maintenance_lock SET last_run_at = clock_timestamp() - interval '20 minutes' WHERE name = 'tick'");
    await pool.query("UPDATE workhorse.retention_state SET last_run_at = clock_timestamp() - interval '20 minutes'");
    const critical = await healthOf();
    expect(critical.status).toBe('critical');
    expect(critical.reasons.map((r) => `${r.level}:${r.code}`)).toEqual(['critical:maintenance_stale', 'critical:retention_stale']);

    await pool.query('SELECT workhorse.tick_v1()');
    expect((await healthOf()).reasons).toEqual([]);
  });

  it('a tick held open by a session past the threshold is reported, as the other ticks skip', async () => {
    const ops = await session(operator);
    await ops.query('BEGIN');
    await ops.query('SELECT workhorse.tick_v1()');
    const { rows } = await pool.query<{ tick: { skipped: boolean } }>('SELECT workhorse.tick_v1() AS tick');
    expect(rows[0].tick.skipped).toBe(true);
    const report = await healthOf({ maintenanceStaleMs: { warn: 0 } });
    expect(report.reasons.map((r) => r.code)).toContain('maintenance_stale');
    await ops.query('ROLLBACK');
  });

  it('a disabled retention is not reported as stale', async () => {
    await pool.query("UPDATE workhorse.retention_state SET last_run_at = clock_timestamp() - interval '20 minutes'");
    await admin.setRetention({ enabled: false });
    await pool.query('SELECT workhorse.tick_v1()');
    expect((await healthOf()).reasons).toEqual([]);
    await admin.setRetention({ enabled: true });
  });
});

describe('health thresholds are checked in SQL', () => {
  it('refuses a pair given with warn above critical, naming it, for any client', async () => {
    const ops = await session(operator);
    const bad: [object, string][] = [
      [{ oldestReadyMs: { warn: 10, critical: 5 } }, 'thresholds.oldestReadyMs'],
      [{ expiredLeases: { warn: 1000, critical: 999 } }, 'thresholds.expiredLeases'],
      [{ oldestReadyMs: { warn: 'soon' } }, 'thresholds.oldestReadyMs.warn'],
      [{ latency: { warn: 1 } }, 'thresholds.latency'],
      [{ maintenanceStaleMs: { severe: 1 } }, 'thresholds.maintenanceStaleMs.severe'],
    ];
    for (const [thresholds, field] of bad) {
      const error = await ops.query('SELECT workhorse.health_v1($1::jsonb)', [JSON.stringify(thresholds)]).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'P1001', column: field });
    }
    const typed = await admin.health({ oldestReadyMs: { warn: 10, critical: 5 } }).catch((e: unknown) => e);
    expect(typed).toBeInstanceOf(WorkhorseValidationError);
    expect((typed as WorkhorseValidationError).field).toBe('thresholds.oldestReadyMs');
    // Equal levels, a null level, and a level given alone (checked against no default) are fine.
    await expect(admin.health({ oldestReadyMs: { warn: 5, critical: 5 }, expiredLeases: { warn: 1000, critical: null }, failedLastHour: { critical: 0 } })).resolves.toMatchObject({
      status: expect.any(String),
    });
  });
});


