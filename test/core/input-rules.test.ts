/**
 * The input rules outside enqueue live once, in the SQL functions (issue 31, item 2): the name
 * filters and filter times of the listings, redriveMany's filter, drainWorker's worker id,
 * actor and reason, setRetention's actor, release's reason, the wait, signal and sleep names,
 * a human wait's choices and decision, and a schedule's fields. Each bad input is refused by the
 * public call with a WorkhorseValidationError naming the field, and by the SQL function itself
 * with P1001 naming it (COLUMN), so a client that skips its own checks gets the same refusal;
 * nothing is written either way.
 */
import { Worker, WorkhorseValidationError, type HandlerContext } from '../../lib/core';
import { expectRejects } from '../support/expect-rejects';
import { claimOne } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { pool, queue, admin } = useTestDatabase({ beforeDrop: () => Promise.all([...running].map((w) => w.stop())) });
const running = new Set<Worker>();

const TABLES = ['job', 'job_runtime', 'job_event', 'job_redrive', 'queue_control', 'operator_change', 'retention_policy', 'worker_registry', 'schedule', 'job_signal', 'job_human_wait', 'job_wait'] as const;

/** Every row of the tables an input could write to, as text: equal before and after means nothing was written. */
async function snapshot(): Promise<string> {
  const { rows } = await pool.query<{ all: string }>(
    `SELECT concat_ws('|', ${TABLES.map((t) => `(SELECT count(*) || ':' || coalesce(md5(string_agg(x::text, ',' ORDER BY x::text)), '') FROM workhorse.${t} x)`).join(', ')}) AS all`,
  );
  return rows[0].all;
}

async function field(promise: Promise<unknown>): Promise<string> {
  return (await expectRejects(promise, WorkhorseValidationError)).field;
}

async function sqlColumn(statement: string, values: unknown[] = []): Promise<string> {
  const error = await pool.query(statement, values).then(
    () => undefined,
    (e: unknown) => e as { code?: string; column?: string },
  );
  expect(error?.code).toBe('P1001');
  return error?.column as string;
}

const NAME = 'bad name';
const LONG_ACTOR = 'a'.repeat(201);

it('the listings refuse a name filter that is not a name, and filter times outside 1970 to 9999, writing nothing', async () => {
  const parent = await queue.enqueue('rules.parent', {}, { queue: 'rules-list' });
  const before = await snapshot();
  expect(await field(admin.listJobs({ queue: NAME }))).toBe('queue');
  expect(await field(admin.listJobs({ type: 'x'.repeat(129) }))).toBe('type');
  expect(await field(admin.listJobs({ parentId: parent, type: NAME }))).toBe('type');
  expect(await field(admin.listDeadLetters({ queue: NAME }))).toBe('queue');
  expect(await field(admin.listDeadLetters({ errorName: 'e'.repeat(201) }))).toBe('errorName');
  expect(await field(admin.listHumanWaits({ type: NAME }))).toBe('type');
  expect(await field(admin.listHumanWaits({ name: 'n'.repeat(201) }))).toBe('name');
  expect(await field(admin.listJobs({ createdAfter: new Date('1969-12-31T23:59:59Z') }))).toBe('createdAfter');
  // The functions themselves (a client that does not check):
  expect(await sqlColumn('SELECT * FROM workhorse.list_jobs_v3(p_queue => $1)', [NAME])).toBe('queue');
  expect(await sqlColumn('SELECT * FROM workhorse.list_jobs_v3(p_created_before => $1)', ['10000-01-01T00:00:00Z'])).toBe('createdBefore');
  expect(await sqlColumn('SELECT * FROM workhorse.list_children_v2($1, p_queue => $2)', [parent, NAME])).toBe('queue');
  expect(await sqlColumn('SELECT * FROM workhorse.list_children_v2($1, p_created_after => $2)', [parent, '1900-01-01T00:00:00Z'])).toBe('createdAfter');
  expect(await sqlColumn('SELECT * FROM workhorse.list_dead_letters_v2(p_type => $1)', [NAME])).toBe('type');
  expect(await sqlColumn('SELECT * FROM workhorse.list_dead_letters_v2(p_finished_after => $1)', ['1900-01-01T00:00:00Z'])).toBe('finishedAfter');
  expect(await sqlColumn('SELECT * FROM workhorse.list_human_waits_v2($1, NULL, NULL, NULL, 50)', [NAME])).toBe('queue');
  expect(await sqlColumn('SELECT * FROM workhorse.list_human_waits_v2(NULL, NULL, $1, NULL, 50)', ['n'.repeat(201)])).toBe('name');
  expect(await snapshot()).toBe(before);
  // A valid filter still lists.
  expect((await admin.listJobs({ queue: 'rules-list' })).items.map((j) => j.id)).toEqual([parent]);
});

it('redriveMany refuses a filter of bad names, a long error name or times outside the range, redriving nothing', async () => {
  const before = await snapshot();
  expect(await field(admin.redriveMany({ queue: NAME }, { requestId: 'r1' }))).toBe('filter.queue');
  expect(await field(admin.redriveMany({ type: NAME }, { requestId: 'r1' }))).toBe('filter.type');
  expect(await field(admin.redriveMany({ errorName: 'e'.repeat(201) }, { requestId: 'r1' }))).toBe('filter.errorName');
  expect(await field(admin.redriveMany({}, { requestId: 'r'.repeat(161) }))).toBe('requestId');
  expect(await sqlColumn(`SELECT * FROM workhorse.redrive_many_v1('{"finishedBefore": "1969-01-01T00:00:00Z"}', 'r1')`)).toBe('filter.finishedBefore');
  expect(await sqlColumn(`SELECT * FROM workhorse.redrive_many_v1('{"errorName": 7}', 'r1')`)).toBe('filter.errorName');
  expect(await snapshot()).toBe(before);
});

it('drainWorker, setRetention and the queue and schedule actions bound worker id, actor and reason in SQL, recording nothing', async () => {
  await pool.query(
    `INSERT INTO workhorse.worker_registry (worker_id, host, pid, queues, concurrency, in_flight, version, started_at, last_seen_at, period_ms)
     VALUES ('rules-worker', 'h', 1, '{default}', 1, 0, 'v', now(), now(), 1000)`,
  );
  const before = await snapshot();
  expect(await field(admin.drainWorker('w'.repeat(201)))).toBe('workerId');
  expect(await field(admin.drainWorker('rules-worker', { actor: LONG_ACTOR }))).toBe('actor');
  expect(await field(admin.drainWorker('rules-worker', { reason: 'r'.repeat(1001) }))).toBe('reason');
  expect(await field(admin.setRetention({ jobEventDays: 30 }, { actor: LONG_ACTOR }))).toBe('actor');
  expect(await field(admin.pauseQueue(NAME))).toBe('queue');
  expect(await field(admin.pauseQueue('rules-q', { actor: LONG_ACTOR }))).toBe('actor');
  expect(await field(admin.pauseSchedule('k', { actor: LONG_ACTOR }))).toBe('actor');
  expect(await field(admin.pauseSchedule(NAME))).toBe('key');
  expect(await field(admin.getScheduleHistory('k', { namespace: NAME }))).toBe('namespace');
  expect(await field(admin.getScheduleHistory('k', { limit: 1001 }))).toBe('limit');
  expect(await sqlColumn('SELECT workhorse.drain_worker_v1($1, $2, $3)', ['rules-worker', null, 'r'.repeat(1001)])).toBe('reason');
  expect(await sqlColumn('SELECT workhorse.set_retention_v1($1, $2)', ['{"enabled": true}', LONG_ACTOR])).toBe('actor');
  expect(await snapshot()).toBe(before);
  expect(await admin.drainWorker('rules-worker', { actor: 'a'.repeat(200), reason: 'r'.repeat(1000) })).toBe('requested');
});

it("release_v1 bounds the event's reason as every reason is bounded (at most 1000 characters), writing nothing", async () => {
  await queue.enqueue('rules.release', {}, { queue: 'rules-release' });
  const owner = await claimOne(pool, 'rules-release');
  const before = await snapshot();
  expect(await sqlColumn('SELECT workhorse.release_v1($1, $2, $3, 0, $4)', [owner.jobId, owner.workerId, owner.fence, 'r'.repeat(1001)])).toBe('reason');
  expect(await snapshot()).toBe(before);
  const { rows } = await pool.query('SELECT workhorse.release_v1($1, $2, $3, 0, $4) AS status', [owner.jobId, owner.workerId, owner.fence, 'r'.repeat(1000)]);
  expect(rows[0].status).toBe('released');
});

it('signals and human decisions: names, keys, actors and decisions are bounded by the SQL functions', async () => {
  const jobId = await queue.enqueue('rules.signal', {}, { queue: 'rules-signal' });
  const before = await snapshot();
  expect(await field(queue.sendSignal(jobId, 'n'.repeat(201), {}))).toBe('name');
  expect(await field(queue.sendSignal(jobId, '', {}))).toBe('name');
  expect(await field(queue.sendSignal(jobId, 'go', {}, { idempotencyKey: 'k'.repeat(201) }))).toBe('idempotencyKey');
  expect(await field(queue.completeHumanWait(jobId, 'approve', 'x'.repeat(70_000), { actor: 'a' }))).toBe('decision');
  expect(await field(queue.completeHumanWait(jobId, 'approve', 'yes', { actor: 'a', idempotencyKey: '' }))).toBe('idempotencyKey');
  expect(await snapshot()).toBe(before);
});

it('a handler is refused bad wait, sleep and children names and bad choices by the SQL functions, its job unchanged', async () => {
  const jobId = await queue.enqueue('rules.handler', {}, { queue: 'rules-handler', maxAttempts: 1 });
  const worker = new Worker(queue, { queues: ['rules-handler'], pollMs: 50, tickMs: 60_000 }).handle('rules.handler', async (_p: unknown, ctx: HandlerContext) => {
    const fields: string[] = [];
    const record = (e: unknown) => fields.push(e instanceof WorkhorseValidationError ? e.field : String(e));
    await ctx.waitForSignal('s'.repeat(201)).catch(record);
    await ctx.waitForHuman('', {}).catch(record);
    await ctx.waitForHuman('h', { choices: Array.from({ length: 51 }, (_, i) => `c${i}`) }).catch(record);
    await ctx.waitForHuman('h', { choices: [''] }).catch(record);
    await ctx.sleep('z'.repeat(201), 10).catch(record);
    await ctx.runChildren('', [{ type: 'x', payload: {} }]).catch(record);
    await ctx.checkpoint('c'.repeat(201), () => 'ran').catch(record);
    return fields;
  });
  running.add(worker);
  const done = worker.run();
  await waitFor(async () => (await admin.getJob(jobId))?.state === 'succeeded', 10_000, 'the handler to finish');
  await worker.stop();
  running.delete(worker);
  await done;
  expect((await admin.getJob(jobId))?.result).toEqual(['name', 'name', 'choices', 'choices', 'name', 'key', 'name']);
  const { rows } = await pool.query(
    `SELECT (SELECT count(*)::int FROM workhorse.job_human_wait WHERE job_id = $1) AS waits,
            (SELECT count(*)::int FROM workhorse.job_wait WHERE job_id = $1) AS sleeps,
            (SELECT count(*)::int FROM workhorse.job_checkpoint WHERE job_id = $1) AS checkpoints`,
    [jobId],
  );
  expect(rows[0]).toEqual({ waits: 0, sleeps: 0, checkpoints: 0 });
});

it('syncSchedules leaves names, enumerations and ranges to sync_schedules_v1, which refuses them naming the field', async () => {
  const before = await snapshot();
  const sync = (definition: Record<string, unknown>) => field(queue.syncSchedules('rules', [{ key: 'k', type: 't', cron: '@daily', ...definition } as never]));
  expect(await sync({ key: NAME })).toBe('definitions[0].key');
  expect(await sync({ type: '' })).toBe('definitions[0].type');
  expect(await sync({ cron: 'c'.repeat(201) })).toMatch(/cron$/); // (an InvalidCronError, naming the schedule)
  expect(await sync({ catchUp: 'some' })).toBe('definitions[0].catchUp');
  expect(await sync({ catchUpLimit: 1001 })).toBe('definitions[0].catchUpLimit');
  expect(await sync({ overlap: 'never' })).toBe('definitions[0].overlap');
  expect(await sync({ missedAfterMs: 999 })).toBe('definitions[0].missedAfterMs');
  expect(await sync({ options: { priority: 101 } })).toMatch(/^definitions\[0\]\.options\.priority$/);
  expect(await field(queue.syncSchedules('rules', [{ key: 'k', type: 't', cron: '@daily' }, { key: 'k', type: 't', cron: '@hourly' }]))).toBe('definitions[1].key');
  expect(await field(queue.syncSchedules(NAME, []))).toBe('namespace');
  expect(await snapshot()).toBe(before);
});
