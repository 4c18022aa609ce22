/**
 * The error envelope is bounded in one place, the database (workhorse.bounded_error): whatever
 * an SDK sends to fail_v1, the stored parts are at most 200 (name) and 32,768
 * (message, stack) characters, a cut part saying so, and the failure is recorded, never refused
 * for its size.
 */
import { Worker, type ErrorEnvelope } from '../../lib/core';
import { ERROR_PART_CAP } from '../../lib/core/worker/error-envelope';
import { claimOne, fail } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

const { db, queue, admin } = useTestDatabase();

const cut = (text: string, kept: number, of: number): string => `${text.slice(0, kept)}… [truncated: ${kept} of ${of} characters kept]`;

async function stored(id: string): Promise<{ job: ErrorEnvelope | null; attempts: (ErrorEnvelope | null)[] }> {
  const job = (await admin.getJob(id))?.error ?? null;
  const { rows } = await db.pool.query<{ error: ErrorEnvelope | null }>('SELECT error FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id', [id]);
  return { job, attempts: rows.map((r) => r.error) };
}

describe('fail_v1 stores the envelope as bounded_error makes it', () => {
  it('three 64K parts of control characters (over 1 MiB of JSON) are recorded, cut, and the job fails', async () => {
    const control = '\u0001\u001f'.repeat(32 * 1024);
    const id = await queue.enqueue('bounds.control', null, { queue: 'bounds-control', maxAttempts: 1 });
    const job = await claimOne(db.pool, 'bounds-control');
    expect(Buffer.byteLength(JSON.stringify({ name: control, message: control, stack: control }))).toBeGreaterThan(1024 * 1024);
    expect((await fail(db.pool, job, { name: control, message: control, stack: control })).status).toBe('failed');
    const expected = { name: cut(control, 200, 65_536), message: cut(control, 32_768, 65_536), stack: cut(control, 32_768, 65_536) };
    expect(await stored(id)).toEqual({ job: expected, attempts: [expected] });
    expect((await admin.getJob(id))?.state).toBe('failed');
  });

  it('a name of 10,000 characters keeps 200; parts within the bound are kept whole; other keys are dropped', async () => {
    const id = await queue.enqueue('bounds.name', null, { queue: 'bounds-name', maxAttempts: 2, retryPolicy: { kind: 'fixed', delayMs: 0 } });
    const name = 'N'.repeat(10_000);
    const message = 'm'.repeat(32_768);
    expect((await fail(db.pool, await claimOne(db.pool, 'bounds-name'), { name, message, code: 'x'.repeat(2_000_000) })).status).toBe('retry_scheduled');
    const expected = { name: cut(name, 200, 10_000), message };
    const { rows } = await db.pool.query<{ last_error: ErrorEnvelope; event: ErrorEnvelope }>(
      `SELECT r.last_error, (SELECT e.data -> 'error' FROM workhorse.job_event e WHERE e.job_id = r.job_id AND e.kind = 'retry_scheduled') AS event
       FROM workhorse.job_runtime r WHERE r.job_id = $1`,
      [id],
    );
    expect(rows).toEqual([{ last_error: expected, event: expected }]);
    expect((await stored(id)).attempts).toEqual([expected]);
    await admin.cancel(id);
  });

  it('counts characters as code points: 32,769 astral characters are cut after 32,768 of them', async () => {
    const id = await queue.enqueue('bounds.astral', null, { queue: 'bounds-astral', maxAttempts: 1 });
    const message = '😀'.repeat(32_769);
    await fail(db.pool, await claimOne(db.pool, 'bounds-astral'), { name: 'Error', message });
    expect((await stored(id)).job).toEqual({ name: 'Error', message: `${'😀'.repeat(32_768)}… [truncated: 32768 of 32769 characters kept]` });
  });

  it('still refuses what is not an envelope, with a typed error naming the field', async () => {
    await queue.enqueue('bounds.shape', null, { queue: 'bounds-shape' });
    const job = await claimOne(db.pool, 'bounds-shape');
    await expect(fail(db.pool, job, { name: 42, message: 'x' })).rejects.toMatchObject({ code: 'P1001', column: 'error' });
    await admin.cancel(job.jobId);
  });
});

describe("release_v1's reason is bounded like every reason", () => {
  it('a release reason of 100,000 characters is refused with P1001 reason, and the job stays claimed', async () => {
    const id = await queue.enqueue('bounds.release', null, { queue: 'bounds-release' });
    const job = await claimOne(db.pool, 'bounds-release');
    const release = (reason: string) =>
      db.pool.query<{ status: string }>('SELECT workhorse.release_v1($1, $2, $3, 0, $4) AS status', [job.jobId, job.workerId, job.fence, reason]);
    await expect(release('r'.repeat(100_000))).rejects.toMatchObject({ code: 'P1001', column: 'reason' });
    expect((await admin.getJob(id))?.state).toBe('active');
    expect((await stored(id)).attempts).toEqual([]);
    const reason = 'r'.repeat(1000);
    expect((await release(reason)).rows[0].status).toBe('released');
    expect((await stored(id)).attempts).toEqual([{ name: 'Released', message: reason }]);
    await admin.cancel(id);
  });
});

describe('the SDK sends the parts as they are, and the database bounds them', () => {
  it('a thrown Error of 3 MB and a 10,000-character name: the stored envelope is the SQL bound of the capped parts', async () => {
    const id = await queue.enqueue('bounds.thrown', null, { queue: 'bounds-thrown', maxAttempts: 1 });
    const worker = new Worker(queue, { queues: ['bounds-thrown'], listen: false }).handle('bounds.thrown', async () => {
      const error = new Error('x'.repeat(3 * 1024 * 1024));
      error.name = 'N'.repeat(10_000);
      error.stack = 's\u0000'.repeat(20_000);
      throw error;
    });
    expect(await worker.runOnce()).toBe(1);
    expect((await stored(id)).job).toEqual({
      name: cut('N'.repeat(10_000), 200, 10_000),
      message: cut('x'.repeat(ERROR_PART_CAP), 32_768, ERROR_PART_CAP),
      stack: cut('s\ufffd'.repeat(20_000), 32_768, 40_000),
    });
  });
});
