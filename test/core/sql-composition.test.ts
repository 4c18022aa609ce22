/**
 * Issue 31 item 5: rules the SQL functions share are written once, as internal helpers. Every
 * job_event row but the hot path's comes from the one event writer, which keeps who wrote it
 * (`login_role`); the owner writes on one job share one preamble (lock_owned checks the worker
 * id, the lock and the fence); the worker's hot path stays one function (its composition of
 * helpers cost ~9% of the drain rate at concurrency 50) and answers as before.
 */
import type { Client } from 'pg';
import { grantRole } from '../../lib/core/grants';
import { clientFor, type LoginRole } from '../support/roles';
import { useTestDatabase } from '../support/test-database';

const opened: Client[] = [];

const { db, pool, roles } = useTestDatabase({
  beforeDrop: async () => {
    for (const client of opened.splice(0)) await client.end().catch(() => undefined);
  },
});

let producer: LoginRole;
let worker: LoginRole;

beforeAll(async () => {
  producer = await roles.create(db.url, 'wh_sql_producer');
  worker = await roles.create(db.url, 'wh_sql_worker');
  await grantRole(db.pool, producer.name, 'producer');
  await grantRole(db.pool, worker.name, 'worker');
});

async function session(role: LoginRole): Promise<Client> {
  const client = await clientFor(role.url);
  opened.push(client);
  return client;
}

/** The workhorse functions whose body matches a regular expression, by name. */
async function functionsMatching(pattern: string): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(
    `SELECT DISTINCT p.proname AS name FROM pg_catalog.pg_proc p
     WHERE p.pronamespace = 'workhorse'::regnamespace AND p.prosrc ~* $1 ORDER BY 1`,
    [pattern],
  );
  return rows.map((row) => row.name);
}

describe('rules written once in SQL', () => {
  it('writes every job_event row through the one event writer, but on the hot path', async () => {
    // complete_and_claim_v1 writes its completions' and claims' events set-based itself: as a
    // composition of helpers it cost ~9% of the drain rate at concurrency 50 (docs/decisions.md).
    expect(await functionsMatching('insert\\s+into\\s+workhorse\\.job_event\\M')).toEqual(['complete_and_claim_v1', 'write_events']);
  });

  it('gives the owner writes on one job one preamble: lock_owned checks the worker id, lock and fence', async () => {
    const owners = await functionsMatching('workhorse\\.lock_owned\\(');
    expect(owners).toEqual(
      expect.arrayContaining(['fail_v1', 'release_v1', 'acknowledge_cancel_v1', 'save_checkpoint_v2', 'sleep_v1',
        'run_children_v1', 'wait_signal_v1', 'wait_human_v1', 'set_progress_v1']),
    );
    // None of them checks the worker id again on its own.
    const checking = new Set(await functionsMatching('workhorse\\.check_worker\\('));
    expect(owners.filter((name) => checking.has(name))).toEqual([]);
    expect(checking.has('lock_owned')).toBe(true);
  });

  it('answers a round trip of completions and claims as before, and its events name the writing login role', async () => {
    const producing = await session(producer);
    const working = await session(worker);
    const { rows: enqueued } = await producing.query<{ job_id: string }>(
      `SELECT e.job_id FROM workhorse.enqueue_many_v1($1::jsonb) AS e`,
      [JSON.stringify([{ type: 'sql.a', queue: 'sql-shape', payload: 1 }, { type: 'sql.b', queue: 'sql-shape', payload: 2, priority: 5 }])],
    );
    const ids = enqueued.map((row) => row.job_id);
    const round = (items: unknown[], limit: number) =>
      working.query<{ job_id: string; status: string; type: string | null; fence_token: string | null; attempt: number | null }>(
        `SELECT c.job_id, c.status, c.type, c.fence_token, c.attempt
         FROM workhorse.complete_and_claim_v1('w-sql', $1::jsonb, ARRAY['sql-shape'], $2, 30000) AS c`,
        [JSON.stringify(items), limit],
      );
    const claimed = (await round([], 10)).rows;
    // Higher priority first, then FIFO.
    expect(claimed.map((row) => [row.job_id, row.status, row.type, row.attempt])).toEqual([
      [ids[1], 'claimed', 'sql.b', 1],
      [ids[0], 'claimed', 'sql.a', 1],
    ]);
    const [b, a] = claimed;
    const answered = (
      await round(
        [
          { jobId: a.job_id, fence: Number(a.fence_token), result: { ok: 'a' } },
          { jobId: b.job_id, fence: Number(b.fence_token) + 100, result: { ok: 'b' } },
        ],
        0,
      )
    ).rows;
    expect(answered.map((row) => [row.job_id, row.status])).toEqual([
      [a.job_id, 'succeeded'],
      [b.job_id, 'stale'],
    ]);

    const { rows: events } = await pool.query<{ job_id: string; kind: string; worker_id: string | null; fence_token: string | null; login_role: string }>(
      `SELECT job_id, kind, worker_id, fence_token, login_role FROM workhorse.job_event
       WHERE job_id = ANY ($1::uuid[]) ORDER BY id`,
      [ids],
    );
    expect(events.filter((e) => e.job_id === a.job_id).map((e) => [e.kind, e.worker_id, e.fence_token, e.login_role])).toEqual([
      ['enqueued', null, null, producer.name],
      ['claimed', 'w-sql', a.fence_token, worker.name],
      ['succeeded', 'w-sql', a.fence_token, worker.name],
    ]);
    expect(events.filter((e) => e.job_id === b.job_id).map((e) => e.kind)).toEqual(['enqueued', 'claimed']);
    const { rows: outcome } = await pool.query<{ state: string; result: unknown }>(
      `SELECT state, result FROM workhorse.job_outcome WHERE job_id = $1`,
      [a.job_id],
    );
    expect(outcome).toEqual([{ state: 'succeeded', result: { ok: 'a' } }]);
  });
});
