/**
 * Operator actions on jobs (sql/063_job_actions.sql) through Admin: run now, reschedule, delete,
 * and cancel / run now / delete over a filter with a dry run; the states each one refuses; what
 * is recorded; the grants.
 */
import { grantRole, JobActionRefusedError, WorkhorseValidationError, type JobActionFilter } from '../../lib/core';
import { claimOne, complete, fail } from '../support/protocol';
import { clientFor, sqlstateOf } from '../support/roles';
import { useTestDatabase } from '../support/test-database';

const { pool, queue, admin, url, roles } = useTestDatabase({ scope: 'test' });

const HOUR = 3_600_000;
const later = (): Date => new Date(Date.now() + HOUR);

async function state(jobId: string): Promise<string | undefined> {
  return (await admin.getJob(jobId))?.state;
}

async function events(jobId: string, kind: string): Promise<Array<{ data: Record<string, unknown>; login_role: string }>> {
  const { rows } = await pool.query<{ data: Record<string, unknown>; login_role: string }>(
    'SELECT data, login_role FROM workhorse.job_event WHERE job_id = $1 AND kind = $2 ORDER BY id',
    [jobId, kind],
  );
  return rows;
}

async function refusal(promise: Promise<unknown>): Promise<JobActionRefusedError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(JobActionRefusedError);
  return error as JobActionRefusedError;
}

async function finished(q: string, type = 'work'): Promise<string> {
  const id = await queue.enqueue(type, {}, { queue: q });
  const claimed = await claimOne(pool, q);
  expect(claimed.jobId).toBe(id);
  await complete(pool, claimed);
  return id;
}

describe('runNow', () => {
  it('makes a scheduled job ready at once and records who asked and why', async () => {
    const id = await queue.enqueue('work', { n: 1 }, { queue: 'rn', runAt: later() });
    expect(await state(id)).toBe('scheduled');
    expect(await admin.runNow(id, { actor: 'alice', reason: 'customer waiting' })).toBe('ready');
    expect(await state(id)).toBe('ready');
    const [event] = await events(id, 'run_now');
    expect(event.data).toMatchObject({ from: 'scheduled', actor: 'alice', reason: 'customer waiting' });
    expect(event.login_role).toEqual(expect.any(String));
    expect((await claimOne(pool, 'rn')).jobId).toBe(id);
    // A ready job is left as it is.
    const ready = await queue.enqueue('work', {}, { queue: 'rn2' });
    expect(await admin.runNow(ready)).toBe('already_ready');
    expect(await events(ready, 'run_now')).toEqual([]);
    expect(await admin.runNow('00000000-0000-7000-8000-000000000000')).toBe('not_found');
  });

  it('runs a retrying job now', async () => {
    const id = await queue.enqueue('work', {}, { queue: 'rt', maxAttempts: 3, retryPolicy: { kind: 'fixed', delayMs: HOUR } });
    await fail(pool, await claimOne(pool, 'rt'), { name: 'Error', message: 'boom' });
    expect(await state(id)).toBe('scheduled');
    expect(await admin.runNow(id)).toBe('ready');
    const again = await claimOne(pool, 'rt');
    expect(again).toMatchObject({ jobId: id, attempt: 2 });
  });

  it('ends a durable sleep now: the handler goes on past it', async () => {
    const id = await queue.enqueue('work', {}, { queue: 'sl' });
    const first = await claimOne(pool, 'sl');
    const slept = await pool.query('SELECT * FROM workhorse.sleep_v1($1, $2, $3, $4, NULL, $5)', [id, first.workerId, first.fence, 'nap', HOUR]);
    expect(slept.rows[0].status).toBe('sleeping');
    expect(await admin.runNow(id, { actor: 'bob' })).toBe('ready');
    const resumed = await claimOne(pool, 'sl');
    const again = await pool.query('SELECT * FROM workhorse.sleep_v1($1, $2, $3, $4, NULL, $5)', [id, resumed.workerId, resumed.fence, 'nap', HOUR]);
    expect(again.rows[0].status).toBe('elapsed');
    expect(resumed.attempt).toBe(1);
  });

  it('refuses a running, blocked, waiting or finished job, naming its state', async () => {
    const running = await queue.enqueue('work', {}, { queue: 'ra' });
    await claimOne(pool, 'ra');
    expect(await refusal(admin.runNow(running))).toMatchObject({ jobId: running, action: 'run_now', state: 'active' });

    const prerequisite = await queue.enqueue('work', {}, { queue: 'rb', runAt: later() });
    const blocked = await queue.enqueue('work', {}, { queue: 'rb', dependsOn: [prerequisite] });
    expect(await refusal(admin.runNow(blocked))).toMatchObject({ state: 'blocked' });

    const waiting = await queue.enqueue('work', {}, { queue: 'rw' });
    const holder = await claimOne(pool, 'rw');
    await pool.query('SELECT * FROM workhorse.wait_signal_v1($1, $2, $3, $4, 1, $5)', [waiting, holder.workerId, holder.fence, 'approval', HOUR]);
    expect(await state(waiting)).toBe('scheduled');
    expect(await refusal(admin.runNow(waiting))).toMatchObject({ state: 'waiting' });

    const done = await finished('rf');
    const error = await refusal(admin.runNow(done));
    expect(error).toMatchObject({ state: 'succeeded' });
    expect(error.message).toMatch(/only a scheduled, retrying or sleeping job/);
  });
});

describe('reschedule', () => {
  it('moves a job that has not started and changes its priority', async () => {
    const id = await queue.enqueue('work', {}, { queue: 'rs', runAt: later(), priority: 10 });
    const soon = new Date(Date.now() + 2 * HOUR);
    expect(await admin.reschedule(id, { runAt: soon, priority: 80, actor: 'carol', reason: 'after the deploy' })).toBe('rescheduled');
    const job = await admin.getJob(id);
    expect(job).toMatchObject({ state: 'scheduled', priority: 80 });
    expect(job?.runAt.getTime()).toBe(soon.getTime());
    const [event] = await events(id, 'rescheduled');
    expect(event.data).toMatchObject({ from: 'scheduled', state: 'scheduled', priority: 80, previousPriority: 10, actor: 'carol' });

    // A ready job pushed back becomes scheduled; a run time in the past makes it ready.
    const ready = await queue.enqueue('work', {}, { queue: 'rs' });
    await admin.reschedule(ready, { runAt: later() });
    expect(await state(ready)).toBe('scheduled');
    await admin.reschedule(id, { runAt: new Date(Date.now() - 1000) });
    expect(await state(id)).toBe('ready');
  });

  it('refuses a started job and bad input before writing', async () => {
    const running = await queue.enqueue('work', {}, { queue: 'rr' });
    await claimOne(pool, 'rr');
    expect(await refusal(admin.reschedule(running, { priority: 5 }))).toMatchObject({ action: 'reschedule', state: 'active' });
    const id = await queue.enqueue('work', {}, { queue: 'rr', runAt: later() });
    await expect(admin.reschedule(id, {})).rejects.toMatchObject({ field: 'runAt' });
    await expect(admin.reschedule(id, { priority: 101 })).rejects.toMatchObject({ field: 'priority' });
    await expect(admin.reschedule(id, { runAt: new Date('10000-01-02T00:00:00Z') })).rejects.toBeInstanceOf(WorkhorseValidationError);
    expect(await events(id, 'rescheduled')).toEqual([]);
  });
});

describe('deleteJob', () => {
  it('deletes a finished job and its rows; its history keeps the deletion', async () => {
    const id = await finished('dl');
    expect(await admin.deleteJob(id, { actor: 'dave', reason: 'gdpr request' })).toBe('deleted');
    expect(await admin.getJob(id)).toBeNull();
    for (const table of ['job', 'job_outcome']) {
      const column = table === 'job' ? 'id' : 'job_id';
      expect((await pool.query(`SELECT 1 FROM workhorse.${table} WHERE ${column} = $1`, [id])).rowCount).toBe(0);
    }
    expect((await pool.query('SELECT 1 FROM workhorse.job_query WHERE job_id = $1', [id])).rowCount).toBe(0);
    const [event] = await events(id, 'deleted');
    expect(event.data).toMatchObject({ state: 'succeeded', actor: 'dave', reason: 'gdpr request' });
    expect(await admin.deleteJob(id)).toBe('not_found');
  });

  it('never deletes a live job nor a live job’s prerequisite', async () => {
    const live = await queue.enqueue('work', {}, { queue: 'dv', runAt: later() });
    expect(await refusal(admin.deleteJob(live))).toMatchObject({ action: 'delete', state: 'scheduled' });
    const prerequisite = await finished('dv');
    // A dependent that waits on something else too stays live, and reads the finished one when it runs.
    const dependent = await queue.enqueue('work', {}, { queue: 'dv', dependsOn: [prerequisite, live] });
    expect(await state(dependent)).toBe('blocked');
    expect(await refusal(admin.deleteJob(prerequisite))).toMatchObject({ state: 'referenced' });
    expect(await state(prerequisite)).toBe('succeeded');
  });
});

describe('bulk actions', () => {
  it('counts first (dry run, with a sample), then cancels a page at a time, recording each job', async () => {
    const ids = await queue.enqueueMany(Array.from({ length: 7 }, (_, i) => ({ type: 'mail', payload: { i }, queue: 'bulk', runAt: later() })));
    await queue.enqueue('other', {}, { queue: 'bulk', runAt: later() });
    const filter: JobActionFilter = { queue: 'bulk', type: 'mail' };
    const preview = await admin.cancelMatching(filter, { dryRun: true, limit: 5 });
    // `more`: one call of this limit would leave some.
    expect(preview).toMatchObject({ dryRun: true, matched: 7, changed: 0, more: true, capped: false, skipped: {} });
    expect((await admin.cancelMatching(filter, { dryRun: true })).more).toBe(false);
    expect(preview.sample.map((s) => s.id)).toEqual([...ids].sort());
    expect(preview.sample[0]).toMatchObject({ queue: 'bulk', type: 'mail', state: 'scheduled' });
    expect(await state(ids[0])).toBe('scheduled');

    const first = await admin.cancelMatching(filter, { limit: 5, actor: 'erin', reason: 'bad template' });
    expect(first).toMatchObject({ dryRun: false, matched: 5, changed: 5, outcomes: { canceled: 5 }, more: true, busy: 0 });
    const second = await admin.cancelMatching(filter, { limit: 5, actor: 'erin', reason: 'bad template' });
    expect(second).toMatchObject({ changed: 2, more: false });
    expect([...first.jobIds, ...second.jobIds].sort()).toEqual([...ids].sort());
    const job = await admin.getJob(ids[3]);
    expect(job).toMatchObject({ state: 'canceled', error: { name: 'Canceled', message: 'bad template', actor: 'erin' } });
    expect((await admin.cancelMatching(filter, { dryRun: true })).matched).toBe(0);
  });

  it('asks the worker of a running job; run now and delete skip running jobs and say so', async () => {
    await queue.enqueue('work', {}, { queue: 'mix' });
    const running = await claimOne(pool, 'mix');
    const scheduled = await queue.enqueue('work', {}, { queue: 'mix', runAt: later() });
    const done = await finished('mix');

    const runNow = await admin.runNowMatching({ queue: 'mix' }, { actor: 'ops' });
    expect(runNow).toMatchObject({ changed: 1, jobIds: [scheduled], outcomes: { ready: 1 }, skipped: { active: 1 } });
    const deleted = await admin.deleteMatching({ queue: 'mix', states: ['succeeded', 'active', 'ready'] }, { actor: 'ops' });
    expect(deleted).toMatchObject({ changed: 1, jobIds: [done], skipped: { active: 1, ready: 1 } });

    const canceled = await admin.cancelMatching({ queue: 'mix' }, { actor: 'ops', reason: 'incident' });
    expect(canceled.outcomes).toEqual({ canceled: 1, cancel_requested: 1 });
    expect(await state(running.jobId)).toBe('active');
    // Asked once: the running job is not taken up again, only counted.
    expect(await admin.cancelMatching({ queue: 'mix' }, { dryRun: true })).toMatchObject({ matched: 0, skipped: { canceling: 1 } });
  });

  it('takes a selection of ids and a time range; refuses a bad filter naming the field', async () => {
    const before = new Date();
    const a = await queue.enqueue('work', {}, { queue: 'sel', runAt: later(), tags: ['t1'] });
    const b = await queue.enqueue('work', {}, { queue: 'sel', runAt: later() });
    expect((await admin.runNowMatching({ jobIds: [b] })).jobIds).toEqual([b]);
    expect((await admin.runNowMatching({ tag: 't1', createdAfter: before }, { dryRun: true })).sample.map((s) => s.id)).toEqual([a]);
    expect((await admin.runNowMatching({ createdBefore: before }, { dryRun: true })).matched).toBe(0);

    await expect(admin.cancelMatching({ queue: 'sel', colour: 'red' } as JobActionFilter)).rejects.toMatchObject({ field: 'filter.colour' });
    await expect(admin.cancelMatching({ finishedAfter: before })).rejects.toMatchObject({ field: 'filter.finishedAfter' });
    await expect(admin.cancelMatching({ states: ['sleeping' as 'ready'] })).rejects.toMatchObject({ field: 'filter.states' });
    await expect(admin.deleteMatching({ jobIds: ['nope'] })).rejects.toMatchObject({ field: 'filter.jobIds' });
    await expect(admin.cancelMatching({}, { limit: 1001 })).rejects.toMatchObject({ field: 'limit' });
    await expect(admin.cancelMatching({}, { reason: 'x'.repeat(1001) })).rejects.toMatchObject({ field: 'reason' });
    expect(await state(a)).toBe('scheduled');
  });
});

describe('grants', () => {
  it('is the operator capability’s alone: a producer or worker role is refused', async () => {
    const producer = await roles.create(url);
    const worker = await roles.create(url);
    const operator = await roles.create(url);
    await grantRole(pool, producer.name, 'producer');
    await grantRole(pool, worker.name, 'worker');
    await grantRole(pool, operator.name, 'operator');
    const id = await queue.enqueue('work', {}, { queue: 'g', runAt: later() });
    const calls = [
      ['SELECT workhorse.run_now_v1($1)', [id]],
      ['SELECT workhorse.reschedule_v1($1, NULL, 5)', [id]],
      ['SELECT workhorse.delete_job_v1($1)', [id]],
      ["SELECT workhorse.cancel_matching_v1('{}', true)", []],
      ["SELECT workhorse.run_now_matching_v1('{}', true)", []],
      ["SELECT workhorse.delete_matching_v1('{}', true)", []],
    ] as const;
    for (const role of [producer, worker]) {
      const client = await clientFor(role.url);
      try {
        for (const [text, values] of calls) expect(await sqlstateOf(client, text, [...values])).toBe('42501');
      } finally {
        await client.end();
      }
    }
    const client = await clientFor(operator.url);
    try {
      const { rows } = await client.query("SELECT workhorse.run_now_matching_v1('{\"queue\": \"g\"}', true) AS r");
      expect(rows[0].r).toMatchObject({ matched: 1 });
      expect((await client.query('SELECT workhorse.run_now_v1($1) AS s', [id])).rows[0].s).toBe('ready');
    } finally {
      await client.end();
    }
  });
});
