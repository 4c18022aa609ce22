/**
 * Signals and human decisions through the privilege model (sql/990_privileges.sql): a worker
 * role runs a handler that waits for a signal and a decision; a producer role sends the signal
 * and records the decision (in its own transaction) but cannot list the waits; an operator role
 * lists the open waits; a worker role can neither send nor decide. Each role holds exactly the
 * grants of `grantRole`.
 */
import type { Pool } from 'pg';
import { Admin, grantRole, Queue, Worker, type Capability, type HandlerContext } from '../../lib/core';
import { expectSplitInvariant } from '../support/invariants';
import { stateOf } from '../support/job-state';
import { poolFor } from '../support/roles';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { db, roles } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: async () => { for (const pool of pools.splice(0)) await pool.end().catch(() => undefined); },
});
const pools: Pool[] = [];

async function poolWith(capabilities: readonly Capability[]): Promise<Pool> {
  const role = await roles.create(db.url, `wh_w${capabilities.map((c) => c[0]).join('')}`);
  await grantRole(db.pool, role.name, capabilities);
  const pool = poolFor(role.url);
  pools.push(pool);
  return pool;
}

it('a worker waits, a producer signals and decides, an operator lists; nothing beyond each capability', async () => {
  const [workerPool, producerPool, operatorPool] = [await poolWith(['worker']), await poolWith(['producer']), await poolWith(['operator'])];
  const producer = new Queue(producerPool);
  const jobId = await producer.enqueue('cap.wait', {}, { queue: 'cap-waits' });

  const worker = new Worker(new Queue(workerPool), { queues: ['cap-waits'], pollMs: 50, tickMs: 100, leaseMs: 10_000 });
  worker.handle('cap.wait', async (_payload: unknown, ctx: HandlerContext) => {
    const signal = await ctx.waitForSignal('go');
    const { decision, actor } = await ctx.waitForHuman('ok', { context: { signal }, choices: ['yes', 'no'] });
    return { signal, decision, actor };
  });
  const running = worker.run();
  try {
    await waitFor(async () => (await stateOf(db.pool, jobId)) === 'blocked', 10_000, 'the job to wait for its signal');
    // A worker role neither sends nor decides nor lists.
    await expect(new Queue(workerPool).sendSignal(jobId, 'go', 1)).rejects.toMatchObject({ code: '42501' });

    const client = await producerPool.connect();
    try {
      await client.query('BEGIN');
      expect(await producer.sendSignal(jobId, 'go', 'from-producer', {}, client)).toBe('delivered');
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const admin = new Admin(operatorPool);
    const open = await waitFor(async () => (await admin.listHumanWaits({ jobId })).items[0], 10_000, 'the human wait to open');
    expect(open).toMatchObject({ name: 'ok', context: { signal: 'from-producer' }, choices: ['yes', 'no'] });
    await expect(new Admin(producerPool).listHumanWaits({ jobId })).rejects.toMatchObject({ code: '42501' });
    await expect(new Admin(workerPool).listHumanWaits({ jobId })).rejects.toMatchObject({ code: '42501' });
    await expect(new Queue(workerPool).completeHumanWait(jobId, 'ok', 'yes', { actor: 'w' })).rejects.toMatchObject({ code: '42501' });

    expect(await producer.completeHumanWait(jobId, 'ok', 'yes', { actor: 'producer-app' })).toBe('completed');
    await waitFor(async () => (await stateOf(db.pool, jobId)) === 'succeeded', 10_000, 'the job to succeed');
    expect((await new Admin(db.pool).getJob(jobId))?.result).toEqual({ signal: 'from-producer', decision: 'yes', actor: 'producer-app' });
    // An operator may answer too (a signal to a finished job writes nothing).
    expect(await new Queue(operatorPool).sendSignal(jobId, 'go', 2)).toBe('finished');
  } finally {
    await worker.stop();
    await running;
  }
  await expectSplitInvariant(db.pool);
});
