/**
 * Issue 30, items 3, 4, 5 and part of 8, at the protocol, as the documented roles: a worker role
 * starts children (run_children_v1), a producer role decides and sends signals, an operator role
 * lists waits.
 *
 * - A child belongs to one parent: its idempotency key is its parent's, so two parents asking
 *   for the same key get two children, and a job cannot be handed itself (or an ancestor) as a
 *   child.
 * - No cycle: a child takes no dependency options (its parent, an ancestor, a sibling, a batch
 *   index: all refused, nothing written).
 * - The deadline of a wait is the server's: after a human wait's timeout a decision answers
 *   `timed_out` and the wait is not listed; a signal sent after a signal wait's timeout is
 *   buffered, and the wait times out.
 * - What a worker may enqueue as children: only under a job it holds with a live fence, at most
 *   1000 per call and 10000 per job.
 */
import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { Admin, grantRole, type Capability } from '../../lib/core';
import { claimOne, complete, type ClaimedJob } from '../support/protocol';
import { poolFor } from '../support/roles';
import { useTestDatabase } from '../support/test-database';

const opened: Pool[] = [];
const { db, roles } = useTestDatabase({
  beforeDrop: async () => {
    for (const pool of opened.splice(0)) await pool.end().catch(() => undefined);
  },
});

async function poolWith(capabilities: readonly Capability[]): Promise<Pool> {
  const role = await roles.create(db.url, `wh_${capabilities.map((c) => c[0]).join('')}`);
  await grantRole(db.pool, role.name, capabilities);
  const pool = poolFor(role.url);
  opened.push(pool);
  return pool;
}

let worker: Pool;
let producer: Pool;
let operator: Pool;
beforeAll(async () => {
  worker = await poolWith(['worker']);
  producer = await poolWith(['producer']);
  operator = await poolWith(['operator']);
});

interface ChildRow {
  status: string;
  child_id: string | null;
  state: string | null;
}

function runChildren(owner: ClaimedJob, key: string, requests: unknown[]): Promise<ChildRow[]> {
  return worker
    .query<ChildRow>('SELECT status, child_id, state FROM workhorse.run_children_v1($1, $2, $3, $4, $5::jsonb)', [
      owner.jobId,
      owner.workerId,
      owner.fence,
      key,
      JSON.stringify(requests),
    ])
    .then((result) => result.rows);
}

async function enqueue(type: string, queue: string, options: object = {}): Promise<string> {
  const { rows } = await producer.query<{ job_id: string }>('SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)', [
    JSON.stringify([{ type, payload: { type }, queue, ...options }]),
  ]);
  return rows[0].job_id;
}

async function stateOf(jobId: string): Promise<string | null> {
  const { rows } = await db.pool.query<{ state: string }>(
    `SELECT coalesce((SELECT state FROM workhorse.job_runtime WHERE job_id = $1),
                     (SELECT state FROM workhorse.job_outcome WHERE job_id = $1)) AS state`,
    [jobId],
  );
  return rows[0].state;
}

/** Rows that a refused call must leave alone: jobs, child calls, edges, idempotency keys, events. */
async function footprint(): Promise<string> {
  const { rows } = await db.pool.query<{ f: string }>(
    `SELECT (SELECT count(*) FROM workhorse.job) || '/' || (SELECT count(*) FROM workhorse.job_child_call) || '/' ||
            (SELECT count(*) FROM workhorse.job_dependency) || '/' || (SELECT count(*) FROM workhorse.enqueue_idempotency) || '/' ||
            (SELECT count(*) FROM workhorse.job_event) AS f`,
  );
  return rows[0].f;
}

/** Enqueues a job of `queue` and claims it as `workerId`. */
async function running(queue: string, workerId: string, options: object = {}): Promise<ClaimedJob> {
  await enqueue('rules.parent', queue, options);
  return claimOne(worker, queue, { workerId });
}

/** Completes the child of `queue` that is ready, then claims its parent again (it replays). */
async function finishChildThenReclaim(childQueue: string, parentQueue: string, workerId: string): Promise<ClaimedJob> {
  const child = await claimOne(worker, childQueue, { workerId: `${workerId}-child` });
  expect(await complete(worker, child, 'done')).toBe('succeeded');
  return claimOne(worker, parentQueue, { workerId });
}

describe('a child belongs to one parent (issue 30.3)', () => {
  it('the same idempotency key under two parents makes two children: cancelling one parent leaves the other alone', async () => {
    const a = await running('own-a', 'w-a');
    const b = await running('own-b', 'w-b');
    const request = { type: 'rules.charge', payload: { customer: 'c1' }, queue: 'own-children', idempotencyKey: 'customer-c1' };
    const [childOfA] = await runChildren(a, 'charge', [request]);
    const [childOfB] = await runChildren(b, 'charge', [request]);
    expect([childOfA.status, childOfB.status]).toEqual(['parked', 'parked']);
    const ids = await db.pool.query<{ parent_id: string; child_ids: string[] }>(
      'SELECT parent_id, child_ids FROM workhorse.job_child_call WHERE parent_id = ANY ($1) ORDER BY parent_id = $2 DESC',
      [[a.jobId, b.jobId], a.jobId],
    );
    const [aChild, bChild] = ids.rows.map((row) => row.child_ids[0]);
    expect(aChild).not.toBe(bChild);

    // Cancelling A cancels A's child only; B's child and B go on.
    const { rows } = await operator.query<{ s: string }>('SELECT workhorse.cancel_v1($1, $2, $3) AS s', [a.jobId, 'test', 'tester']);
    expect(rows[0].s).toBe('canceled');
    expect(await stateOf(aChild)).toBe('canceled');
    expect(await stateOf(bChild)).toBe('ready');
    expect(await stateOf(b.jobId)).toBe('blocked');
    const child = await claimOne(worker, 'own-children', { workerId: 'w-child' });
    expect(child.jobId).toBe(bChild);
    expect(await complete(worker, child, 'charged')).toBe('succeeded');
    expect(await stateOf(b.jobId)).toBe('ready');
  });

  it('a job whose child repeats its own type, payload and idempotency key gets a new child, not itself', async () => {
    const self = await running('own-self', 'w-self', { idempotencyKey: 'same' });
    const [row] = await runChildren(self, 'me', [{ type: 'rules.parent', payload: { type: 'rules.parent' }, queue: 'own-self', idempotencyKey: 'same' }]);
    expect(row.status).toBe('parked');
    const { rows } = await db.pool.query<{ child_ids: string[] }>('SELECT child_ids FROM workhorse.job_child_call WHERE parent_id = $1', [self.jobId]);
    expect(rows[0].child_ids).toHaveLength(1);
    expect(rows[0].child_ids[0]).not.toBe(self.jobId);
    expect(await stateOf(self.jobId)).toBe('blocked');
    // A producer's enqueue with that key still finds the producer's job: the key spaces are apart.
    expect(await enqueue('rules.parent', 'own-self', { idempotencyKey: 'same' })).toBe(self.jobId);
  });

  it('a child key that leads to the job itself or an ancestor is refused, and nothing is written', async () => {
    // Grandparent G starts P; P starts C under the child key "k".
    const g = await running('anc-g', 'w-g');
    expect((await runChildren(g, 'p', [{ type: 'rules.p', payload: null, queue: 'anc-p' }]))[0].status).toBe('parked');
    const p = await claimOne(worker, 'anc-p', { workerId: 'w-p' });
    expect((await runChildren(p, 'c', [{ type: 'rules.c', payload: null, queue: 'anc-c', idempotencyKey: 'k' }]))[0].status).toBe('parked');
    const replayed = await finishChildThenReclaim('anc-c', 'anc-p', 'w-p');
    // D waits for P (a dependent): as P's child, P and D would wait for each other too.
    const d = await enqueue('rules.d', 'anc-d', { dependsOn: [p.jobId] });
    // Point P's key "k" at G, at P itself, then at D (a row only the owner can write: the
    // server's own check, should any path ever resolve a child to one of them).
    const hash = createHash('sha256')
      .update(Buffer.concat([Buffer.from(p.jobId.replace(/-/g, ''), 'hex'), Buffer.from([0]), Buffer.from('k')]))
      .digest();
    for (const target of [g.jobId, p.jobId, d]) {
      const updated = await db.pool.query('UPDATE workhorse.enqueue_idempotency SET job_id = $1 WHERE key_hash = $2', [target, hash]);
      expect(updated.rowCount).toBe(1);
      const before = await footprint();
      await expect(runChildren(replayed, `again-${target}`, [{ type: 'rules.c', payload: null, queue: 'anc-c', idempotencyKey: 'k' }])).rejects.toMatchObject({
        code: 'P1001',
        column: 'children[0].idempotencyKey',
        message: expect.stringContaining('a child cannot be its own parent or ancestor'),
      });
      expect(await footprint()).toBe(before);
      expect(await stateOf(replayed.jobId)).toBe('active');
    }
  });
});

describe('no cycle can be built with children (issue 30.4)', () => {
  it('refuses dependency options on a child (its parent, an ancestor, a sibling, a batch index, an unrelated job, a policy), writing nothing', async () => {
    const g = await running('cyc-g', 'w-cg');
    expect((await runChildren(g, 'p', [{ type: 'rules.p', payload: null, queue: 'cyc-p' }]))[0].status).toBe('parked');
    const p = await claimOne(worker, 'cyc-p', { workerId: 'w-cp' });
    expect((await runChildren(p, 'first', [{ type: 'rules.c', payload: null, queue: 'cyc-c' }]))[0].status).toBe('parked');
    const replayed = await finishChildThenReclaim('cyc-c', 'cyc-p', 'w-cp');
    const { rows } = await db.pool.query<{ child_ids: string[] }>('SELECT child_ids FROM workhorse.job_child_call WHERE parent_id = $1', [p.jobId]);
    const sibling = rows[0].child_ids[0];
    const unrelated = await enqueue('rules.other', 'cyc-other');
    const cases: [object[], string][] = [
      [[{ type: 'rules.c', payload: null, dependsOn: [replayed.jobId] }], 'children[0].dependsOn'],
      [[{ type: 'rules.c', payload: null, dependsOn: [g.jobId] }], 'children[0].dependsOn'],
      [[{ type: 'rules.c', payload: null, dependsOn: [sibling] }], 'children[0].dependsOn'],
      [[{ type: 'rules.c', payload: null }, { type: 'rules.c', payload: null, dependsOn: [0] }], 'children[1].dependsOn'],
      [[{ type: 'rules.c', payload: null, dependsOn: [unrelated], onDependencyFailed: 'run' }], 'children[0].dependsOn'],
      [[{ type: 'rules.c', payload: null, onDependencyCanceled: 'run' }], 'children[0].onDependencyCanceled'],
    ];
    for (const [requests, column] of cases) {
      const before = await footprint();
      await expect(runChildren(replayed, 'cycle', requests)).rejects.toMatchObject({ code: 'P1001', column });
      expect(await footprint()).toBe(before);
    }
    expect(await stateOf(replayed.jobId)).toBe('active');
    // The same job may still start children that wait for nothing.
    expect((await runChildren(replayed, 'cycle', [{ type: 'rules.c', payload: null, queue: 'cyc-c' }]))[0].status).toBe('parked');
  });
});

describe("a worker's reach through run_children_v1 (issue 30.8)", () => {
  it('only the owner of a job under a live fence starts children: another worker id or an old fence is stale, nothing written', async () => {
    const job = await running('reach-owner', 'w-owner');
    const ready = await enqueue('rules.parent', 'reach-ready');
    const before = await footprint();
    for (const owner of [{ ...job, workerId: 'w-intruder' }, { ...job, fence: String(BigInt(job.fence) - 1n) }]) {
      expect(await runChildren(owner, 'x', [{ type: 'rules.any', payload: null, queue: 'anywhere' }])).toEqual([
        { status: 'stale', child_id: null, state: null },
      ]);
    }
    // Nor a job that is not running (a ready one nobody holds).
    expect(await runChildren({ ...job, jobId: ready }, 'x', [{ type: 'rules.any', payload: null }])).toEqual([
      { status: 'stale', child_id: null, state: null },
    ]);
    expect(await footprint()).toBe(before);
  });

  it('a job starts at most 10000 children in all', async () => {
    const job = await running('reach-count', 'w-count');
    // As if earlier calls had started 9999 (rows only the owner can write).
    await db.pool.query(
      `INSERT INTO workhorse.job_child_call (parent_id, key, request, child_ids, created_at)
       SELECT $1, 'earlier', '[]', array_agg(gen_random_uuid()), now() FROM generate_series(1, 9999)`,
      [job.jobId],
    );
    const before = await footprint();
    await expect(runChildren(job, 'more', [{ type: 'rules.c', payload: 1 }, { type: 'rules.c', payload: 2 }])).rejects.toMatchObject({
      code: 'P1001',
      column: 'children',
      message: expect.stringContaining('at most 10000 child jobs in all: it started 9999'),
    });
    expect(await footprint()).toBe(before);
    expect((await runChildren(job, 'more', [{ type: 'rules.c', payload: 1, queue: 'reach-count-c' }]))[0].status).toBe('parked');
  });
});

/** Parks `job` on a human wait with a timeout of `timeoutMs` (as its worker). */
async function waitHuman(job: ClaimedJob, name: string, timeoutMs: number | null): Promise<string> {
  const { rows } = await worker.query<{ status: string }>('SELECT status FROM workhorse.wait_human_v1($1, $2, $3, $4, $5, $6, $7)', [
    job.jobId,
    job.workerId,
    job.fence,
    name,
    JSON.stringify({ amount: 1 }),
    JSON.stringify(['approve', 'reject']),
    timeoutMs,
  ]);
  return rows[0].status;
}

async function decide(jobId: string, name: string): Promise<string> {
  const { rows } = await producer.query<{ s: string }>("SELECT workhorse.complete_human_wait_v1($1, $2, '\"approve\"', 'alice') AS s", [jobId, name]);
  return rows[0].s;
}

async function waitSignal(job: ClaimedJob, name: string, seq: number, timeoutMs: number | null): Promise<{ status: string; payload: unknown }> {
  const { rows } = await worker.query<{ status: string; payload: unknown }>(
    'SELECT status, payload FROM workhorse.wait_signal_v1($1, $2, $3, $4, $5, $6)',
    [job.jobId, job.workerId, job.fence, name, seq, timeoutMs],
  );
  return rows[0];
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Makes due jobs ready and claims the one job of `queue` again. */
async function wakeAndClaim(queue: string, workerId: string): Promise<ClaimedJob> {
  await operator.query('SELECT workhorse.promote_v1()');
  return claimOne(worker, queue, { workerId });
}

describe("the deadline of a wait is the server's (issue 30.5)", () => {
  it('after a human wait times out, a decision answers timed_out, writes nothing, the wait is not listed, and the handler sees the timeout', async () => {
    const admin = new Admin(operator);
    const job = await running('late-human', 'w-h');
    expect(await waitHuman(job, 'approve', 300)).toBe('waiting');
    expect((await admin.listHumanWaits({ jobId: job.jobId })).items).toHaveLength(1);
    await pause(400);
    // The job has not woken yet (no promotion ran): the deadline still holds.
    expect(await stateOf(job.jobId)).toBe('scheduled');
    expect((await admin.listHumanWaits({ jobId: job.jobId })).items).toEqual([]);
    const before = await footprint();
    expect(await decide(job.jobId, 'approve')).toBe('timed_out');
    expect(await footprint()).toBe(before);
    const replay = await wakeAndClaim('late-human', 'w-h2');
    expect(await waitHuman(replay, 'approve', 300)).toBe('timed_out');
    // Once the wait recorded its timeout, a decision still answers timed_out.
    expect(await decide(job.jobId, 'approve')).toBe('timed_out');
  });

  it('a decision before the timeout completes as before', async () => {
    const job = await running('early-human', 'w-e');
    expect(await waitHuman(job, 'approve', 60_000)).toBe('waiting');
    expect(await decide(job.jobId, 'approve')).toBe('completed');
    const replay = await claimOne(worker, 'early-human', { workerId: 'w-e2' });
    expect(await waitHuman(replay, 'approve', 60_000)).toBe('decided');
  });

  it('a signal sent after its wait timed out is buffered: the wait times out, and the next wait of that name takes it', async () => {
    const job = await running('late-signal', 'w-s');
    expect((await waitSignal(job, 'shipped', 1, 300)).status).toBe('waiting');
    await pause(400);
    const { rows } = await producer.query<{ s: string }>("SELECT workhorse.send_signal_v1($1, 'shipped', '{\"n\": 1}') AS s", [job.jobId]);
    expect(rows[0].s).toBe('buffered');
    const replay = await wakeAndClaim('late-signal', 'w-s2');
    expect(await waitSignal(replay, 'shipped', 1, 300)).toEqual({ status: 'timed_out', payload: null });
    expect(await waitSignal(replay, 'shipped', 2, null)).toEqual({ status: 'delivered', payload: { n: 1 } });
  });

  it('a signal sent before the timeout is delivered, even when the job replays after the timeout', async () => {
    const job = await running('early-signal', 'w-t');
    expect((await waitSignal(job, 'shipped', 1, 300)).status).toBe('waiting');
    const { rows } = await producer.query<{ s: string }>("SELECT workhorse.send_signal_v1($1, 'shipped', '{\"n\": 2}') AS s", [job.jobId]);
    expect(rows[0].s).toBe('delivered');
    await pause(400);
    const replay = await claimOne(worker, 'early-signal', { workerId: 'w-t2' });
    expect(await waitSignal(replay, 'shipped', 1, 300)).toEqual({ status: 'delivered', payload: { n: 2 } });
  });
});
