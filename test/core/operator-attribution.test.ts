/**
 * Issue 30, item 9 (the rest): every operator change of a setting kept in place (queue pause
 * and resume, queue limits, drain requests, the retention policy) records the login role
 * (`session_user`) next to the caller-chosen actor, in the row and in the append-only
 * `operator_change` history, and the reads show it; the schedule history shows it too
 * (`get_schedule_history_v2`). Operators here are the documented operator roles, through Admin.
 */
import type { Pool } from 'pg';
import { Admin, WorkhorseValidationError } from '../../lib/core';
import { grantRole } from '../../lib/core/grants';
import { readMigrationSteps } from '../../lib/core/migration-steps';
import { MIGRATIONS_DIR, MIN_SCHEMA_VERSION, SQL_DIR } from '../../lib/core/schema';
import { migrateSchema, type SchemaSource } from '../../lib/core/schema-migrator';
import { installBaseline } from '../support/baseline';
import { createTestDatabase } from '../support/db';
import { poolFor, type LoginRole } from '../support/roles';
import { useTestDatabase } from '../support/test-database';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const pools: Pool[] = [];
const { db, pool, roles } = useTestDatabase({
  beforeDrop: () => Promise.all(pools.splice(0).map((p) => p.end())),
});

let alice: LoginRole;
let bob: LoginRole;
let producer: LoginRole;
/** Two operator logins, both naming the same actor: only the login role tells them apart. */
let asAlice: Admin;
let asBob: Admin;

function adminOf(role: LoginRole): Admin {
  const rolePool = poolFor(role.url, 2);
  pools.push(rolePool);
  return new Admin(rolePool);
}

beforeAll(async () => {
  alice = await roles.create(db.url, 'wh_ops_alice');
  bob = await roles.create(db.url, 'wh_ops_bob');
  producer = await roles.create(db.url, 'wh_producer');
  await grantRole(db.pool, alice.name, 'operator');
  await grantRole(db.pool, bob.name, 'operator');
  await grantRole(db.pool, producer.name, 'producer');
  asAlice = adminOf(alice);
  asBob = adminOf(bob);
});

async function registerWorker(id: string): Promise<void> {
  const info = { host: 'h', pid: 1, queues: ['default'], concurrency: 1, version: 'test', startedAt: new Date().toISOString(), periodMs: 60_000 };
  await pool.query('SELECT * FROM workhorse.report_worker_v2($1, $2, 0, NULL)', [id, JSON.stringify(info)]);
}

describe('queue pause and resume', () => {
  it('record the login role that made each change, the row showing the last and the history every one', async () => {
    const queue = 'attr-billing';
    await asAlice.pauseQueue(queue, { actor: 'oncall', reason: 'provider outage' });
    expect((await asBob.listQueues()).find((q) => q.queue === queue)).toMatchObject({
      paused: true, changedBy: 'oncall', loginRole: alice.name, reason: 'provider outage',
    });
    // A repeat changes nothing: the first pause keeps its actor and login role, and no history row.
    await asBob.pauseQueue(queue, { actor: 'oncall' });
    expect((await asBob.listQueues()).find((q) => q.queue === queue)?.loginRole).toBe(alice.name);
    await asBob.resumeQueue(queue, { actor: 'oncall', reason: 'provider back' });
    expect((await asAlice.listQueues()).find((q) => q.queue === queue)).toMatchObject({ paused: false, changedBy: 'oncall', loginRole: bob.name });

    const changes = await asAlice.listOperatorChanges({ subject: queue });
    expect(changes.map((c) => [c.kind, c.actor, c.loginRole, c.reason])).toEqual([
      ['queue_resumed', 'oncall', bob.name, 'provider back'],
      ['queue_paused', 'oncall', alice.name, 'provider outage'],
    ]);
    expect(changes[0].at.getTime()).toBeGreaterThanOrEqual(changes[1].at.getTime());
  });

  it('the previous release read (list_queues_v1) keeps its columns', async () => {
    const { fields } = await pool.query('SELECT * FROM workhorse.list_queues_v1()');
    expect(fields.map((f) => f.name)).toEqual([
      'queue', 'paused', 'changed_at', 'changed_by', 'reason', 'ready', 'scheduled', 'active', 'blocked',
      'concurrency', 'rate_limit', 'rate_interval_ms',
    ]);
  });
});

describe('queue policies', () => {
  it('record who set the limits in force, and each real change in the history with what was set', async () => {
    const queue = 'attr-limits';
    await asAlice.setQueuePolicy(queue, { concurrency: 5 }, { actor: 'capacity', reason: 'db load' });
    // The same limits again (an application setting them at each start) change nothing.
    await asBob.setQueuePolicy(queue, { concurrency: 5 }, { actor: 'capacity' });
    let info = await asBob.listQueues().then((all) => all.find((q) => q.queue === queue));
    expect(info).toMatchObject({ concurrency: 5, policyChangedBy: 'capacity', policyLoginRole: alice.name, policyReason: 'db load' });
    await asBob.setQueuePolicy(queue, { concurrency: 2, rateLimit: { limit: 10, intervalMs: 1000 } }, { actor: 'capacity', reason: 'slower' });
    info = await asAlice.listQueues().then((all) => all.find((q) => q.queue === queue));
    expect(info).toMatchObject({ concurrency: 2, policyLoginRole: bob.name, policyReason: 'slower' });
    expect(info?.policyChangedAt).toBeInstanceOf(Date);

    const changes = await asAlice.listOperatorChanges({ kind: 'queue_policy_set', subject: queue });
    expect(changes.map((c) => [c.loginRole, c.detail])).toEqual([
      [bob.name, { queue, concurrency: 2, rateLimit: { limit: 10, intervalMs: 1000 }, perKey: null }],
      [alice.name, { queue, concurrency: 5, rateLimit: null, perKey: null }],
    ]);
  });
});

describe('drain requests', () => {
  it('record the login role of the request; a second request keeps the first', async () => {
    await registerWorker('attr-w1');
    expect(await asBob.drainWorker('attr-w1', { actor: 'deploy', reason: 'host maintenance' })).toBe('requested');
    expect(await asAlice.drainWorker('attr-w1', { actor: 'deploy' })).toBe('already_requested');
    const worker = (await asAlice.listWorkers()).find((w) => w.workerId === 'attr-w1');
    expect(worker).toMatchObject({ drainRequestedBy: 'deploy', drainLoginRole: bob.name, drainReason: 'host maintenance' });
    const changes = await asAlice.listOperatorChanges({ kind: 'worker_drain_requested', subject: 'attr-w1' });
    expect(changes.map((c) => [c.actor, c.loginRole, c.reason])).toEqual([['deploy', bob.name, 'host maintenance']]);
    // The previous release's read keeps its columns.
    const { fields } = await pool.query('SELECT * FROM workhorse.list_workers_v1()');
    expect(fields.map((f) => f.name)).not.toContain('drain_login_role');
  });
});

describe('the retention policy', () => {
  afterAll(() => pool.query(`SELECT workhorse.set_retention_v1('{"jobEventDays": 14, "finishedJobMs": 2592000000}')`));

  it('records the login role of each change; the v1 status keeps its shape', async () => {
    await asAlice.setRetention({ jobEventDays: 7 }, { actor: 'compliance' });
    await asBob.setRetention({ finishedJobMs: 86_400_000 }, { actor: 'compliance' });
    const { policy } = await asAlice.retentionStatus();
    expect(policy).toMatchObject({ jobEventDays: 7, finishedJobMs: 86_400_000, changedBy: 'compliance', loginRole: bob.name });
    const changes = await asBob.listOperatorChanges({ kind: 'retention_set' });
    expect(changes.slice(0, 2).map((c) => [c.loginRole, c.subject, c.detail])).toEqual([
      [bob.name, null, { finishedJobMs: 86_400_000 }],
      [alice.name, null, { jobEventDays: 7 }],
    ]);
    const v1 = await pool.query<{ s: { policy: Record<string, unknown> } }>('SELECT workhorse.retention_status_v1() AS s');
    expect(Object.keys(v1.rows[0].s.policy).sort()).toEqual(['attemptHistoryDays', 'changedAt', 'changedBy', 'enabled', 'finishedJobMs', 'jobEventDays']);
  });
});

describe('the schedule history', () => {
  it('shows the login role of each change next to its actor (get_schedule_history_v2)', async () => {
    const producerPool = poolFor(producer.url, 2);
    pools.push(producerPool);
    await producerPool.query("SELECT * FROM workhorse.sync_schedules_v1('attr', $1::jsonb, 'deploy-bot')", [
      JSON.stringify([{ key: 'nightly', cron: '0 3 * * *', type: 'report', payload: {} }]),
    ]);
    await asAlice.pauseSchedule('nightly', { namespace: 'attr', actor: 'oncall', reason: 'quiet night' });
    const history = await asBob.getScheduleHistory('nightly', { namespace: 'attr' });
    expect(history.map((h) => [h.change, h.actor, h.loginRole])).toEqual([
      ['paused', 'oncall', alice.name],
      ['created', 'deploy-bot', producer.name],
    ]);
  });
});

describe('listOperatorChanges', () => {
  it('pages newest first below beforeId, and refuses a bad filter with a typed error naming the field (checked by SQL)', async () => {
    const queue = 'attr-paging';
    for (let i = 0; i < 3; i += 1) {
      await asAlice.pauseQueue(queue, { actor: `a${i}` });
      await asAlice.resumeQueue(queue, { actor: `a${i}` });
    }
    const first = await asBob.listOperatorChanges({ subject: queue, limit: 4 });
    const rest = await asBob.listOperatorChanges({ subject: queue, limit: 4, beforeId: first[first.length - 1].id });
    expect([...first, ...rest].map((c) => `${c.kind}:${c.actor}`)).toEqual([
      'queue_resumed:a2', 'queue_paused:a2', 'queue_resumed:a1', 'queue_paused:a1', 'queue_resumed:a0', 'queue_paused:a0',
    ]);
    for (const [filter, field] of [[{ kind: 'bogus' }, 'kind'], [{ limit: 0 }, 'limit'], [{ limit: 1001 }, 'limit'], [{ beforeId: 'x' }, 'beforeId'], [{ other: 1 }, 'other']] as const) {
      await expect(asBob.listOperatorChanges(filter as never)).rejects.toMatchObject({ constructor: WorkhorseValidationError, field });
    }
  });

  it('is an operator read: a producer cannot call it', async () => {
    const producerPool = poolFor(producer.url, 1);
    pools.push(producerPool);
    await expect(producerPool.query('SELECT * FROM workhorse.list_operator_changes_v1()')).rejects.toMatchObject({ code: '42501' });
  });
});

it('rows written before the step that records the login role read a null login role after the upgrade', async () => {
  const all = readMigrationSteps(MIGRATIONS_DIR);
  const step = all.find((s) => s.name === 'operator_attribution_and_stored_checkpoints');
  if (step === undefined) throw new Error('the step is not shipped');
  const before = all.filter((s) => s.version < step.version);
  const source = (steps: typeof all): SchemaSource => ({
    installSql: () => readdirSync(SQL_DIR).filter((n) => n.endsWith('.sql')).sort().map((n) => readFileSync(join(SQL_DIR, n), 'utf8')),
    steps: () => steps,
    target: steps[steps.length - 1].version,
    minimum: Math.min(MIN_SCHEMA_VERSION, steps[steps.length - 1].version),
  });
  const old = await createTestDatabase({ installSchema: false });
  try {
    await installBaseline(old.pool);
    const migrate = async (steps: typeof all) => {
      const client = await old.pool.connect();
      try {
        await migrateSchema(old.pool, client, source(steps));
      } finally {
        client.release();
      }
    };
    await migrate(before);
    // Written by the previous schema's functions, which record no login role.
    await old.pool.query("SELECT workhorse.pause_queue_v1('attr-old', 'oncall', 'before')");
    await old.pool.query(`SELECT workhorse.set_queue_policy_v1('attr-old', '{"concurrency": 3}', 'capacity')`);
    await old.pool.query(`SELECT workhorse.set_retention_v1('{"jobEventDays": 10}', 'compliance')`);
    const info = { host: 'h', pid: 1, queues: ['default'], concurrency: 1, version: 'test', startedAt: new Date().toISOString(), periodMs: 60_000 };
    await old.pool.query('SELECT * FROM workhorse.report_worker_v2($1, $2, 0, NULL)', ['attr-old-w', JSON.stringify(info)]);
    await old.pool.query("SELECT workhorse.drain_worker_v1('attr-old-w', 'deploy')");
    await migrate(all);

    const admin = new Admin(old.pool);
    expect((await admin.listQueues()).find((q) => q.queue === 'attr-old')).toMatchObject({
      paused: true, changedBy: 'oncall', loginRole: null, concurrency: 3, policyChangedBy: 'capacity', policyLoginRole: null,
    });
    expect((await admin.listWorkers()).find((w) => w.workerId === 'attr-old-w')).toMatchObject({ drainRequestedBy: 'deploy', drainLoginRole: null });
    expect((await admin.retentionStatus()).policy).toMatchObject({ jobEventDays: 10, changedBy: 'compliance', loginRole: null });
    // The history starts with the step: what came before it is not invented.
    expect(await admin.listOperatorChanges()).toEqual([]);
    // And a change after the upgrade records the login role.
    await admin.resumeQueue('attr-old', { actor: 'oncall' });
    const { rows } = await old.pool.query<{ user: string }>('SELECT session_user AS user');
    expect((await admin.listQueues()).find((q) => q.queue === 'attr-old')?.loginRole).toBe(rows[0].user);
  } finally {
    await old.drop();
  }
});
