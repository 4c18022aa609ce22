/**
 * sdk/protocol/limits.json is the one source of the limits and defaults the SDKs type, document
 * and default (issue 31, item 2). The SQL functions enforce the enqueue limits; this test proves
 * they enforce exactly the file's values (the bound accepted, one past it refused with P1001
 * naming the field, nothing written), that the defaults an enqueue gets are the file's, and that
 * the SDKs ship the file byte for byte (each SDK's own test proves it parses every value:
 * sdk/python/tests/test_limits.py, sdk/go/limits_internal_test.go).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LIMITS, Worker, WorkhorseValidationError, type HandlerContext } from '../../lib/core';
import { LIMITS_FILE, PROTOCOL_LIMITS } from '../../lib/core/limits';
import { useTestDatabase } from '../support/test-database';

const ROOT = join(__dirname, '..', '..');
const SOURCE = join(ROOT, 'sdk', 'protocol', 'limits.json');
const source = JSON.parse(readFileSync(SOURCE, 'utf8')) as typeof PROTOCOL_LIMITS;

describe('limits.json', () => {
  it('is what the TypeScript client reads, and what the Python and Go SDKs ship byte for byte (run node scripts/copy-sdk-sql.js after changing it)', () => {
    expect(LIMITS_FILE).toBe(SOURCE);
    expect(PROTOCOL_LIMITS).toEqual(source);
    for (const copy of [join('sdk', 'python', 'src', 'workhorse', 'limits.json'), join('sdk', 'go', 'limits.json')]) {
      expect([copy, readFileSync(join(ROOT, copy), 'utf8')]).toEqual([copy, readFileSync(SOURCE, 'utf8')]);
    }
    // The exported LIMITS are the file's values.
    expect(LIMITS).toMatchObject({ nameLength: source.enqueue.nameLength.max, batchSize: source.enqueue.batchSize.max, jsonBytes: source.enqueue.jsonBytes.max });
  });
});

describe('the SQL enforces the values of limits.json', () => {
  const { pool, queue, admin } = useTestDatabase();
  const e = source.enqueue;
  const r = source.retryPolicy;

  async function jobCount(): Promise<number> {
    const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM workhorse.job');
    return rows[0].n;
  }

  /** Enqueues one request straight through enqueue_many_v1 (no client check in between). */
  async function enqueue(request: Record<string, unknown>): Promise<unknown> {
    return pool.query('SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)', [JSON.stringify([{ type: 'limits.probe', payload: null, ...request }])]);
  }

  async function expectRefused(request: Record<string, unknown>, field: string): Promise<void> {
    const before = await jobCount();
    const error = (await enqueue(request).then(
      () => null,
      (thrown: unknown) => thrown,
    )) as { code?: string; column?: string } | null;
    expect([field, error?.code, error?.column]).toEqual([field, 'P1001', `requests[0].${field}`]);
    expect(await jobCount()).toBe(before);
  }

  const name = (n: number) => 'n'.repeat(n);
  const text = (n: number) => 'k'.repeat(n);
  const cases: [string, (v: number) => Record<string, unknown>, number, number][] = [
    ['priority', (v) => ({ priority: v }), e.priority.min, e.priority.max],
    ['maxAttempts', (v) => ({ maxAttempts: v }), e.maxAttempts.min, e.maxAttempts.max],
    ['executionTimeoutMs', (v) => ({ executionTimeoutMs: v }), e.executionTimeoutMs.min, e.executionTimeoutMs.max],
    ['idempotencyTtlMs', (v) => ({ idempotencyKey: `ttl-${v}`, idempotencyTtlMs: v }), e.idempotencyTtlMs.min, e.idempotencyTtlMs.max],
    ['dedupe.windowMs', (v) => ({ dedupe: { key: `window-${v}`, windowMs: v, mode: 'throttle' } }), e.dedupeWindowMs.min, e.dedupeWindowMs.max],
    ['retryPolicy.delayMs', (v) => ({ retryPolicy: { kind: 'fixed', delayMs: v } }), r.delayMs.min, r.delayMs.max],
    ['retryPolicy.multiplier', (v) => ({ retryPolicy: { kind: 'exponential', multiplier: v } }), r.multiplier.min, r.multiplier.max],
  ];

  it.each(cases)('%s: accepts its bounds and refuses one past each, naming the field', async (field, request, min, max) => {
    await enqueue(request(min));
    await enqueue(request(max));
    await expectRefused(request(min - 1), field);
    await expectRefused(request(max + 1), field);
  });

  it('names, tags, tag lengths, idempotency and dedupe keys', async () => {
    await enqueue({ queue: name(e.nameLength.max) });
    await expectRefused({ queue: name(e.nameLength.max + 1) }, 'queue');
    await enqueue({ tags: Array.from({ length: e.tags.max }, (_, i) => `t${i}`) });
    await expectRefused({ tags: Array.from({ length: e.tags.max + 1 }, (_, i) => `t${i}`) }, 'tags');
    await enqueue({ tags: [text(e.tagLength.max)] });
    await expectRefused({ tags: [text(e.tagLength.max + 1)] }, 'tags[0]');
    await expectRefused({ tags: [text(e.tagLength.min - 1)] }, 'tags[0]');
    await enqueue({ idempotencyKey: text(e.idempotencyKeyLength.max) });
    await expectRefused({ idempotencyKey: text(e.idempotencyKeyLength.max + 1) }, 'idempotencyKey');
    await expectRefused({ idempotencyKey: text(e.idempotencyKeyLength.min - 1) }, 'idempotencyKey');
    const dedupe = (key: string) => ({ dedupe: { key, windowMs: 1000, mode: 'throttle' } });
    await enqueue(dedupe(text(e.dedupeKeyLength.max)));
    await expectRefused(dedupe(text(e.dedupeKeyLength.max + 1)), 'dedupe.key');
    await expectRefused(dedupe(text(e.dedupeKeyLength.min - 1)), 'dedupe.key');
    await enqueue({ concurrencyKey: text(e.concurrencyKeyLength.max) });
    await expectRefused({ concurrencyKey: text(e.concurrencyKeyLength.max + 1) }, 'concurrencyKey');
    await expectRefused({ concurrencyKey: text(e.concurrencyKeyLength.min - 1) }, 'concurrencyKey');
  });

  it('a batch of batchSize.max requests, and no more', async () => {
    const batch = (n: number) => JSON.stringify(Array.from({ length: n }, () => ({ type: 'limits.batch', payload: null })));
    await pool.query('SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)', [batch(e.batchSize.max)]);
    await expect(pool.query('SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)', [batch(e.batchSize.max + 1)])).rejects.toMatchObject({ code: 'P1003', column: 'requests' });
  });

  it('gives a job the defaults of limits.json', async () => {
    const { rows } = await pool.query<{ job_id: string }>('SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)', [JSON.stringify([{ type: 'limits.defaults', payload: null }])]);
    const { rows: jobs } = await pool.query<{ queue: string; priority: number; max_attempts: number }>(
      'SELECT queue, priority, max_attempts FROM workhorse.job WHERE id = $1',
      [rows[0].job_id],
    );
    expect(jobs[0]).toEqual({ queue: e.queue.default, priority: e.priority.default, max_attempts: e.maxAttempts.default });
    const { rows: policy } = await pool.query<{ p: unknown }>("SELECT workhorse.normalize_retry_policy(NULL, 'retryPolicy') AS p");
    expect(policy[0].p).toEqual(r.default);
  });

  it('the TypeScript client leaves ranges to the SQL, which names the field as the caller gave it', async () => {
    const before = await jobCount();
    const error = await queue.enqueue('limits.client', null, { priority: e.priority.max + 1 }).then(
      () => null,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    expect(error).toMatchObject({ field: 'priority', message: `priority: must be an integer from ${e.priority.min} to ${e.priority.max}` });
    expect(await jobCount()).toBe(before);
  });

  it("a handler's sleep and wait timeouts: the SQL refuses one past the bounds, naming the field, and the job goes on", async () => {
    const h = source.handler;
    const worker = new Worker(queue, { queues: ['limits-handler'], concurrency: 1, workerId: 'limits-worker' });
    worker.handle('limits.handler', async (_payload: null, ctx: HandlerContext) => {
      const calls: (() => Promise<unknown>)[] = [
        () => ctx.sleep('too-long', h.sleepMs.max + 1),
        () => ctx.sleep('too-short', h.sleepMs.min - 1),
        () => ctx.waitForSignal('signal', { timeoutMs: h.waitTimeoutMs.max + 1 }),
        () => ctx.waitForHuman('human', { timeoutMs: h.waitTimeoutMs.min - 1 }),
      ];
      const fields: string[] = [];
      for (const call of calls) fields.push(await call().then(() => 'accepted', (e: unknown) => (e instanceof WorkhorseValidationError ? e.field : String(e))));
      return fields;
    });
    const id = await queue.enqueue('limits.handler', null, { queue: 'limits-handler' });
    expect(await worker.runOnce()).toBe(1);
    expect(await admin.getJob(id)).toMatchObject({ state: 'succeeded', result: ['ms', 'ms', 'timeoutMs', 'timeoutMs'] });
  });

  it("a handler's names (waits, sleeps, checkpoints, children) and the years of a time: the SQL holds the file's bounds", async () => {
    const n = source.handler.nameLength;
    await queue.enqueue('limits.names', null, { queue: 'limits-names' });
    const { rows } = await pool.query<{ job_id: string; fence_token: string }>("SELECT job_id, fence_token FROM workhorse.claim_many_v1('{limits-names}', 'limits-names-worker', 1, 60000)");
    const owner = [rows[0].job_id, 'limits-names-worker', rows[0].fence_token];
    const column = (statement: string, values: unknown[]) =>
      pool.query(statement, values).then(
        () => 'accepted',
        (e: { code?: string; column?: string }) => `${e.code}:${e.column}`,
      );
    const checkpoint = 'SELECT workhorse.save_checkpoint_v2($1, $2, $3, $4, $5::jsonb)';
    expect(await column(checkpoint, [...owner, 'c'.repeat(n.max), '1'])).toBe('accepted');
    expect(await column(checkpoint, [...owner, 'c'.repeat(n.max + 1), '1'])).toBe('P1001:name');
    expect(await column(checkpoint, [...owner, 'c'.repeat(n.min - 1), '1'])).toBe('P1001:name');
    const signal = 'SELECT workhorse.send_signal_v1($1, $2, NULL)';
    expect(await column(signal, [rows[0].job_id, 's'.repeat(n.max + 1)])).toBe('P1001:name');
    const d = source.dates;
    const listJobs = 'SELECT * FROM workhorse.list_jobs_v3(p_created_after => $1)';
    expect(await column(listJobs, [`${d.minYear}-01-01T00:00:00Z`])).toBe('accepted');
    expect(await column(listJobs, [`${d.maxYear}-12-31T23:59:59Z`])).toBe('accepted');
    expect(await column(listJobs, [`${d.minYear - 1}-12-31T23:59:59Z`])).toBe('P1001:createdAfter');
    expect(await column(listJobs, [`${d.maxYear + 1}-01-01T00:00:00Z`])).toBe('P1001:createdAfter');
  });
});
