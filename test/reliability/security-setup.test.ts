/**
 * The recommended setup of docs/security.md, run as written: its SQL block (with the test
 * database's name for `app`), the schema installed by the non-superuser owner it creates, and the
 * grants of its TypeScript block (and of its psql line, when psql is installed). Then each login
 * does its work and nothing else, the protocol functions run with the rights of that ordinary
 * owner (a tick still prepares history partitions, owned by it), and a role the setup did not
 * name cannot connect at all.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'pg';
import { Admin, grantRole, installSchema, Queue, Worker } from '../../lib/core';
import { withAdminClient } from '../support/db';
import { poolFor } from '../support/roles';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const DOC = join(__dirname, '..', '..', 'docs', 'security.md');
const ROLES = ['workhorse_owner', 'checkout_api', 'checkout_worker', 'ops', 'wh_stranger'];

const opened: { end(): Promise<unknown> }[] = [];
const { db } = useTestDatabase({
  installSchema: false,
  beforeDrop: async () => {
    for (const handle of opened.splice(0)) await handle.end().catch(() => undefined);
  },
});

/** The ```sql blocks of docs/security.md. */
function sqlBlocks(): string[] {
  return [...readFileSync(DOC, 'utf8').matchAll(/^```sql\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

function urlAs(role: string, password = 'change-me'): string {
  const url = new URL(db.url);
  url.username = role;
  url.password = password;
  return url.toString();
}

async function dropRoles(): Promise<void> {
  await withAdminClient(async (client) => {
    for (const role of ROLES) await client.query(`DROP ROLE IF EXISTS ${role}`);
  });
}

beforeAll(async () => {
  await dropRoles();
  const blocks = sqlBlocks();
  expect(blocks).toHaveLength(1);
  await db.pool.query(blocks[0].replace(/ DATABASE app /g, ` DATABASE ${db.name} `));
  await withAdminClient((client) => client.query("CREATE ROLE wh_stranger LOGIN PASSWORD 'change-me'"));

  const owner = poolFor(urlAs('workhorse_owner'));
  try {
    await installSchema(owner);
    await grantRole(owner, 'checkout_api', 'producer');
    await grantRole(owner, 'checkout_worker', 'worker');
    await grantRole(owner, 'ops', 'operator');
  } finally {
    await owner.end();
  }
});

// After the drop: the roles hold privileges in the database until it is gone.
afterAll(dropRoles);

function pool(role: string) {
  const p = poolFor(urlAs(role));
  opened.push(p);
  return p;
}

it('installs as the ordinary owner: it owns every table and function, and no function runs as a superuser', async () => {
  const { rows } = await db.pool.query<{ owner: string; superuser: boolean; n: number }>(
    `SELECT r.rolname AS owner, r.rolsuper AS superuser, count(*)::int AS n
     FROM (SELECT relowner AS o FROM pg_class WHERE relnamespace = 'workhorse'::regnamespace
           UNION ALL SELECT proowner FROM pg_proc WHERE pronamespace = 'workhorse'::regnamespace) x
     JOIN pg_roles r ON r.oid = x.o GROUP BY 1, 2`,
  );
  expect(rows).toEqual([{ owner: 'workhorse_owner', superuser: false, n: expect.any(Number) }]);
});

it('lets each login do its work: enqueue and read its jobs, run them (ticks prepare partitions), operate', async () => {
  const producer = new Queue(pool('checkout_api'));
  const id = await producer.enqueue('order.ship', { orderId: 'o-1' }, { queue: 'orders' });
  expect(await producer.getJob(id)).toMatchObject({ state: 'ready' });

  // The day after tomorrow's partitions are what a tick prepares when they are missing.
  const { rows } = await db.pool.query<{ day: string }>(
    "SELECT to_char((clock_timestamp() AT TIME ZONE 'UTC')::date + 2, 'YYYYMMDD') AS day",
  );
  await db.pool.query(`DROP TABLE workhorse.job_event_p${rows[0].day}, workhorse.attempt_history_p${rows[0].day}`);

  const worker = new Worker(new Queue(pool('checkout_worker')), { queues: ['orders'], pollMs: 50, tickMs: 100 }).handle(
    'order.ship',
    async (payload: { orderId: string }, ctx) => ctx.checkpoint('label', () => `label-${payload.orderId}`),
  );
  const errors: unknown[] = [];
  worker.on(['worker.error'], (event) => errors.push(event.error));
  const done = worker.run();
  const ops = new Admin(pool('ops'));
  try {
    await waitFor(async () => (await ops.getJob(id))?.state === 'succeeded', 20_000, 'the job to succeed');
    await waitFor(
      async () => {
        const { rows: parts } = await db.pool.query<{ owner: string }>(
          `SELECT relowner::regrole::text AS owner FROM pg_class WHERE relname IN ($1, $2)`,
          [`job_event_p${rows[0].day}`, `attempt_history_p${rows[0].day}`],
        );
        return parts.length === 2 && parts.every((p) => p.owner === 'workhorse_owner');
      },
      20_000,
      'a tick to prepare the missing partitions',
    );
  } finally {
    await worker.stop();
    await done;
  }
  expect(errors).toEqual([]);
  expect(await ops.getJob(id)).toMatchObject({ state: 'succeeded', result: 'label-o-1' });
  const retention = await pool('ops').query<{ dropped: number }>(
    "SELECT workhorse.drop_history_before_v1(clock_timestamp() - interval '90 days') AS dropped",
  );
  expect(retention.rows[0].dropped).toBe(0);
  await expect(new Admin(pool('checkout_api')).getJob(id)).rejects.toMatchObject({ code: '42501' });
  await expect(new Queue(pool('ops')).enqueue('order.ship', {})).rejects.toMatchObject({ code: '42501' });
});

it('keeps every other role out: no CONNECT, so not even NOTIFY', async () => {
  const stranger = new Client({ connectionString: urlAs('wh_stranger') });
  stranger.on('error', () => undefined);
  await expect(stranger.connect()).rejects.toMatchObject({ code: '42501' });
});

const hasPsql = spawnSync('sh', ['-c', 'command -v psql'], { encoding: 'utf8' }).status === 0;

(hasPsql ? it : it.skip)(`the psql form of the grants (docs/least-privilege.sql) gives the same privileges${hasPsql ? '' : ' (SKIPPED: psql is not installed)'}`, async () => {
  const result = spawnSync(
    'psql',
    [urlAs('workhorse_owner'), '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-v', 'role=checkout_api', '-v', 'capabilities=producer', '-f', join(__dirname, '..', '..', 'docs', 'least-privilege.sql')],
    { encoding: 'utf8' },
  );
  expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
  const { rows } = await db.pool.query<{ name: string }>(
    `SELECT p.proname AS name FROM pg_proc p
     WHERE p.pronamespace = 'workhorse'::regnamespace AND has_function_privilege('checkout_api', p.oid, 'EXECUTE') ORDER BY 1`,
  );
  expect(rows.map((r) => r.name)).toEqual(['await_results_v1', 'complete_human_wait_v1', 'enqueue_many_v1', 'enqueue_many_v2', 'get_own_job_v1', 'oldest_client_v1', 'plan_schedule_v1', 'schedules_to_plan_v1', 'send_signal_v1', 'sync_schedules_v1']);
});
