import { fromPgError, WorkhorseValidationError, type EnqueueOptions, type EnqueueRequest } from '../../lib/core';
import { useTestDatabase } from '../support/test-database';

const TABLES = ['job', 'job_runtime', 'job_query', 'job_event'] as const;
type RowCounts = Record<(typeof TABLES)[number], number>;

const MiB = 1024 * 1024;

// Bad input has to get past the type checker first, the way it does from JavaScript callers.
const opts = (value: unknown): EnqueueOptions => value as EnqueueOptions;
const str = (value: unknown): string => value as string;

function nested(depth: number, leaf: unknown = 'leaf'): unknown {
  let value = leaf;
  for (let i = 0; i < depth; i++) value = i % 2 === 0 ? { a: value } : [value];
  return value;
}

class Point {
  constructor(
    readonly x = 1,
    readonly y = 2,
  ) {}
}

interface PgError {
  code?: string;
  column?: string;
  message: string;
}

describe('validation', () => {
  const { db, queue, admin } = useTestDatabase();

  beforeAll(async () => {
    // Rows already present make "nothing was written" a comparison, not a check for emptiness.
    await queue.enqueueMany([
      { type: 'seed.one', payload: { n: 1 } },
      { type: 'seed.two', payload: { n: 2 }, runAt: new Date(Date.now() + 3_600_000) },
    ]);
  });

  async function countRows(): Promise<RowCounts> {
    const { rows } = await db.pool.query<RowCounts>(
      `SELECT ${TABLES.map((t) => `(SELECT count(*)::int FROM workhorse.${t}) AS ${t}`).join(', ')}`,
    );
    return rows[0];
  }

  /** Runs a call that must be refused with a validation error naming `field`, and writes nothing. */
  async function expectRefused(call: () => Promise<unknown>, field: string | RegExp): Promise<WorkhorseValidationError> {
    const before = await countRows();
    const error = await call().then(
      () => new Error('the call was accepted'),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(WorkhorseValidationError);
    const refused = error as WorkhorseValidationError;
    if (typeof field === 'string') expect(refused.field).toBe(field);
    else expect(refused.field).toMatch(field);
    // The message leads with the field, so a log line alone says what to fix.
    expect(refused.message.startsWith(`${refused.field}: `)).toBe(true);
    expect(await countRows()).toEqual(before);
    return refused;
  }

  describe('payloads that are not JSON', () => {
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = cyclic;
    const cyclicArray: unknown[] = [1];
    cyclicArray.push({ back: cyclicArray });
    const sparse = [1, , 3]; // eslint-disable-line no-sparse-arrays

    const cases: [string, unknown, string | RegExp][] = [
      ['a function', () => 1, 'payload'],
      ['a nested function', { fn: () => 1 }, 'payload.fn'],
      ['undefined at top level', undefined, 'payload'],
      ['undefined inside an array (JSON.stringify would turn it into null)', [1, undefined], 'payload[1]'],
      ['a hole in a sparse array', sparse, 'payload[1]'],
      ['a BigInt', BigInt(10), 'payload'],
      ['a nested BigInt', { amount: BigInt('12345678901234567890') }, 'payload.amount'],
      ['an object cycle', cyclic, 'payload.self'],
      ['an array cycle', cyclicArray, 'payload[1].back'],
      ['NaN', { x: NaN }, 'payload.x'],
      ['Infinity', { x: Infinity }, 'payload.x'],
      ['-Infinity at top level', -Infinity, 'payload'],
      ['a Date object', { when: new Date('2030-01-01T00:00:00Z') }, 'payload.when'],
      ['a Map', new Map([['a', 1]]), 'payload'],
      ['a Set inside an array', [new Set([1])], 'payload[0]'],
      ['a class instance', new Point(), 'payload'],
      ['a nested class instance', { at: new Point() }, 'payload.at'],
      ['a symbol', Symbol('s'), 'payload'],
      ['a nested symbol', { s: Symbol('s') }, 'payload.s'],
      ['a symbol key', { [Symbol('k')]: 1 }, 'payload'],
      ['\\u0000 in a string', { s: 'a\u0000b' }, 'payload.s'],
      ['\\u0000 in a key', { 'a\u0000b': 1 }, /^payload\b.*a\\u0000b/],
      ['a lone high surrogate', { s: 'abc\ud83d' }, 'payload.s'],
      ['a lone low surrogate', { s: '\ude00abc' }, 'payload.s'],
      ['a reversed surrogate pair', ['\ude00\ud83d'], 'payload[0]'],
      ['a lone surrogate in a key', { 'k\ud800': 1 }, /^payload\b.*k\\ud800/],
      ['a payload over 1 MiB', { s: 'x'.repeat(MiB) }, 'payload'],
      // Bytes, not characters: 524 288 two-byte characters are more than 1 MiB of UTF-8.
      ['a payload over 1 MiB in UTF-8 bytes', 'é'.repeat(MiB / 2), 'payload'],
      ['a payload nested deeper than 100 levels', nested(101), /^payload(\.a|\[0\])+$/],
    ];

    it.each(cases)('refuses %s', async (_label, payload, field) => {
      await expectRefused(() => queue.enqueue('payload.bad', payload), field);
    });

    it('says which limit a too large payload broke', async () => {
      const error = await expectRefused(() => queue.enqueue('payload.big', 'x'.repeat(MiB)), 'payload');
      expect(error.message).toMatch(/1 MiB/);
    });
  });

  describe('type and queue names', () => {
    const badNames: [string, unknown][] = [
      ['empty', ''],
      ['129 characters', 'a'.repeat(129)],
      ['a leading space', ' email.send'],
      ['a leading dot', '.email'],
      ['a leading dash', '-email'],
      ['an inner space', 'email send'],
      ['a tab', 'email\tsend'],
      ['a non-ASCII letter', 'émail'],
      ['a quote', "email'send"],
      ['a semicolon', 'email;send'],
      ['\\u0000', 'email\u0000'],
      ['a number instead of a string', 42],
      ['null', null],
    ];

    it.each(badNames)('refuses a type with %s', async (_label, type) => {
      await expectRefused(() => queue.enqueue(str(type), {}), 'type');
    });

    it.each(badNames.filter(([label]) => label !== 'null'))('refuses a queue with %s', async (_label, name) => {
      await expectRefused(() => queue.enqueue('queue.bad', {}, opts({ queue: name })), 'queue');
    });

    it('refuses a null queue (omit it to get the default)', async () => {
      await expectRefused(() => queue.enqueue('queue.bad', {}, opts({ queue: null })), 'queue');
    });

    it('names the limit in the message', async () => {
      const error = await expectRefused(() => queue.enqueue('a'.repeat(129), {}), 'type');
      expect(error.message).toMatch(/128/);
    });

    it('accepts 128 characters and every allowed punctuation mark', async () => {
      const long = 'T'.repeat(128);
      const punctuated = 'a0.b_c:d/e-f';
      const id = await queue.enqueue(long, null, { queue: punctuated });
      const job = await admin.getJob(id);
      expect(job).toMatchObject({ type: long, queue: punctuated });
      const other = await queue.enqueue(punctuated, null, { queue: 'Q'.repeat(128) });
      expect(await admin.getJob(other)).toMatchObject({ type: punctuated, queue: 'Q'.repeat(128) });
    });
  });

  describe('numbers out of range', () => {
    it.each([-1, 101, 1.5, NaN, Infinity, '5', true])('refuses priority %p', async (priority) => {
      const error = await expectRefused(() => queue.enqueue('num.bad', {}, opts({ priority })), 'priority');
      // (NaN and Infinity are refused by the client: JSON cannot carry them.)
      expect(error.message).toMatch(/0 to 100|not a JSON number/);
    });

    it.each([0, 101, 2.5, -3, '3'])('refuses maxAttempts %p', async (maxAttempts) => {
      const error = await expectRefused(() => queue.enqueue('num.bad', {}, opts({ maxAttempts })), 'maxAttempts');
      expect(error.message).toMatch(/1 to 100/);
    });

    it('accepts the bounds', async () => {
      const ids = await queue.enqueueMany([
        { type: 'num.bounds', payload: null, priority: 0, maxAttempts: 1 },
        { type: 'num.bounds', payload: null, priority: 100, maxAttempts: 100 },
      ]);
      expect(await admin.getJob(ids[0])).toMatchObject({ priority: 0, maxAttempts: 1 });
      expect(await admin.getJob(ids[1])).toMatchObject({ priority: 100, maxAttempts: 100 });
    });
  });

  describe('options', () => {
    it.each([
      ['priorty', { priorty: 5 }],
      ['delay', { delay: 1000 }],
      ['dedupeKey', { queue: 'default', dedupeKey: 'k' }],
    ])('refuses the unknown option key %s', async (key, options) => {
      await expectRefused(() => queue.enqueue('opt.bad', {}, opts(options)), key);
    });

    it('refuses options that are not an object', async () => {
      await expectRefused(() => queue.enqueue('opt.bad', {}, opts('fast')), 'options');
      await expectRefused(() => queue.enqueue('opt.bad', {}, opts([1])), 'options');
    });

    it.each([
      ['an ISO string', '2030-01-01T00:00:00Z'],
      ['a number of milliseconds', Date.now() + 60_000],
      ['an invalid Date', new Date('not a date')],
      ['a Date of NaN', new Date(NaN)],
      ['a Date after the year 9999', new Date('+010000-01-01T00:00:00Z')],
      ['null', null],
      ['a date-like object', { getTime: () => Date.now() }],
    ])('refuses runAt given as %s', async (_label, runAt) => {
      await expectRefused(() => queue.enqueue('opt.runat', {}, opts({ runAt })), 'runAt');
    });

    it.each([
      ['a string', 'exponential', 'retryPolicy'],
      ['an array', [], 'retryPolicy'],
      ['null', null, 'retryPolicy'],
      ['no kind', {}, 'retryPolicy.kind'],
      ['an unknown kind', { kind: 'linear' }, 'retryPolicy.kind'],
      ['a key of the other kind', { kind: 'fixed', initialMs: 100 }, 'retryPolicy.initialMs'],
      ['an unknown key', { kind: 'exponential', factor: 2 }, 'retryPolicy.factor'],
      ['a negative delay', { kind: 'fixed', delayMs: -1 }, 'retryPolicy.delayMs'],
      ['a fractional delay', { kind: 'fixed', delayMs: 1.5 }, 'retryPolicy.delayMs'],
      ['a delay over a week', { kind: 'fixed', delayMs: 604_800_001 }, 'retryPolicy.delayMs'],
      ['a delay given as a string', { kind: 'exponential', initialMs: '1000' }, 'retryPolicy.initialMs'],
      ['a multiplier below 1', { kind: 'exponential', multiplier: 0.5 }, 'retryPolicy.multiplier'],
      ['a multiplier above 10', { kind: 'exponential', multiplier: 11 }, 'retryPolicy.multiplier'],
      ['a NaN multiplier', { kind: 'exponential', multiplier: NaN }, 'retryPolicy.multiplier'],
      ['a non-boolean jitter', { kind: 'exponential', jitter: 'yes' }, 'retryPolicy.jitter'],
      ['maxMs below initialMs', { kind: 'exponential', initialMs: 5000, maxMs: 1000 }, 'retryPolicy.maxMs'],
    ])('refuses a retryPolicy with %s', async (_label, retryPolicy, field) => {
      await expectRefused(() => queue.enqueue('opt.retry', {}, opts({ retryPolicy })), field);
    });

    it.each([
      ['a string', 'urgent', 'tags'],
      ['an object', { a: 'b' }, 'tags'],
      ['21 tags', Array.from({ length: 21 }, (_, i) => `t${i}`), 'tags'],
      ['an empty tag', [''], 'tags[0]'],
      ['a 65-character tag', ['ok', 'x'.repeat(65)], 'tags[1]'],
      ['a number', ['ok', 5], 'tags[1]'],
      ['null', ['ok', 'ok', null], 'tags[2]'],
      ['\\u0000', ['a\u0000'], 'tags[0]'],
      ['a lone surrogate', ['\ud800'], 'tags[0]'],
    ])('refuses tags with %s', async (_label, tags, field) => {
      await expectRefused(() => queue.enqueue('opt.tags', {}, opts({ tags })), field);
    });
  });

  describe('batches', () => {
    const ok = (n: number): EnqueueRequest => ({ type: 'batch.ok', payload: { n } });
    const requests = (bad: unknown, at: number, length = 4): EnqueueRequest[] =>
      Array.from({ length }, (_, i) => (i === at ? (bad as EnqueueRequest) : ok(i)));

    it.each([
      ['a bad type', { type: '', payload: {} }, 1, 'requests[1].type'],
      ['a missing type', { payload: {} }, 2, 'requests[2].type'],
      ['a non-JSON payload', { type: 'x', payload: { x: NaN } }, 2, 'requests[2].payload.x'],
      ['an unknown key', { type: 'x', payload: {}, priorty: 1 }, 1, 'requests[1].priorty'],
      ['a bad priority', { type: 'x', payload: {}, priority: 101 }, 3, 'requests[3].priority'],
      ['a bad runAt', { type: 'x', payload: {}, runAt: '2030-01-01' }, 1, 'requests[1].runAt'],
      ['a bad retry policy', { type: 'x', payload: {}, retryPolicy: { kind: 'linear' } }, 1, 'requests[1].retryPolicy.kind'],
      ['a bad tag', { type: 'x', payload: {}, tags: [''] }, 1, 'requests[1].tags[0]'],
      ['a bad queue', { type: 'x', payload: {}, queue: 'a b' }, 0, 'requests[0].queue'],
      ['null instead of a request', null, 1, 'requests[1]'],
      ['a string instead of a request', 'x', 1, 'requests[1]'],
    ])('names requests[i] for %s', async (_label, bad, at, field) => {
      await expectRefused(() => queue.enqueueMany(requests(bad, at)), field);
    });

    it('refuses 1001 requests, naming the limit', async () => {
      const error = await expectRefused(
        () => queue.enqueueMany(Array.from({ length: 1001 }, (_, i) => ok(i))),
        'requests',
      );
      expect(error.message).toMatch(/1000/);
    });

    it('refuses something that is not an array', async () => {
      await expectRefused(() => queue.enqueueMany({ type: 'x', payload: {} } as unknown as EnqueueRequest[]), 'requests');
    });

    it('accepts exactly 1000 requests', async () => {
      const before = await countRows();
      const ids = await queue.enqueueMany(Array.from({ length: 1000 }, (_, i) => ok(i)));
      expect(ids).toHaveLength(1000);
      const after = await countRows();
      expect(after).toEqual({
        job: before.job + 1000,
        job_runtime: before.job_runtime + 1000,
        job_query: before.job_query + 1000,
        job_event: before.job_event + 1000,
      });
    });
  });

  describe('the SQL function validates again (clients in other languages)', () => {
    const ok = { type: 'sql.ok', payload: { ok: true } };

    async function expectSqlRefused(requests: unknown, code: string, column: string): Promise<void> {
      const before = await countRows();
      const error = await db.pool
        .query('SELECT * FROM workhorse.enqueue_many_v1($1::jsonb)', [JSON.stringify(requests)])
        .then(
          () => new Error('the call was accepted'),
          (e: unknown) => e as PgError,
        );
      expect(error).toMatchObject({ code, column });
      expect(await countRows()).toEqual(before);
      // The TypeScript client maps those SQLSTATEs to the same typed error.
      const mapped = fromPgError(error);
      expect(mapped).toBeInstanceOf(WorkhorseValidationError);
      expect((mapped as WorkhorseValidationError).field).toBe(column);
    }

    it.each([
      ['an object', { type: 'x', payload: 1 }],
      ['a string', 'requests'],
      ['JSON null', null],
    ])('refuses requests that are not an array (%s)', async (_label, requests) => {
      await expectSqlRefused(requests, 'P1001', 'requests');
    });

    it.each([
      ['an unknown key', [ok, { ...ok, priorty: 1 }], 'requests[1].priorty'],
      ['priority 101', [ok, ok, { ...ok, priority: 101 }], 'requests[2].priority'],
      ['priority -1', [{ ...ok, priority: -1 }], 'requests[0].priority'],
      ['priority 1.5', [ok, { ...ok, priority: 1.5 }], 'requests[1].priority'],
      ['priority as a string', [{ ...ok, priority: '5' }], 'requests[0].priority'],
      ['maxAttempts 0', [ok, { ...ok, maxAttempts: 0 }], 'requests[1].maxAttempts'],
      ['a missing payload', [ok, { type: 'sql.ok' }], 'requests[1].payload'],
      ['a missing type', [{ payload: 1 }], 'requests[0].type'],
      ['a bad type name', [ok, { ...ok, type: 'a b' }], 'requests[1].type'],
      ['a 129-character queue', [{ ...ok, queue: 'q'.repeat(129) }], 'requests[0].queue'],
      ['a request that is not an object', [ok, 'x'], 'requests[1]'],
      ['runAt in words', [ok, { ...ok, runAt: 'tomorrow' }], 'requests[1].runAt'],
      ['runAt without a time zone', [{ ...ok, runAt: '2030-01-01T00:00:00' }], 'requests[0].runAt'],
      ['runAt as a number', [{ ...ok, runAt: 1893456000000 }], 'requests[0].runAt'],
      ['runAt at hour 24', [{ ...ok, runAt: '2030-01-01T24:00:00Z' }], 'requests[0].runAt'],
      ['an unknown retry policy kind', [{ ...ok, retryPolicy: { kind: 'linear' } }], 'requests[0].retryPolicy.kind'],
      ['a negative retry delay', [{ ...ok, retryPolicy: { kind: 'fixed', delayMs: -5 } }], 'requests[0].retryPolicy.delayMs'],
      ['tags that are not an array', [{ ...ok, tags: 'a' }], 'requests[0].tags'],
      ['an empty tag', [{ ...ok, tags: ['a', ''] }], 'requests[0].tags[1]'],
      ['a payload over 1 MiB', [ok, { ...ok, payload: 'x'.repeat(MiB) }], 'requests[1].payload'],
    ])('refuses %s with P1001 naming the field', async (_label, requests, column) => {
      await expectSqlRefused(requests, 'P1001', column);
    });

    // Each of these matches the shape of an ISO timestamp but is not a time PostgreSQL can
    // convert; the validator must refuse it with P1001 and the field, not a raw cast error.
    it.each([
      ['a day that does not exist', '2030-02-30T00:00:00Z'],
      ['a time zone offset out of range', '2030-01-01T00:00:00+99'],
      ['the year 0', '0000-01-01T00:00:00Z'],
    ])('refuses runAt with %s with P1001 naming the field', async (_label, runAt) => {
      await expectSqlRefused([ok, { ...ok, runAt }], 'P1001', 'requests[1].runAt');
    });

    it('refuses more than 1000 requests with P1003', async () => {
      await expectSqlRefused(Array.from({ length: 1001 }, () => ok), 'P1003', 'requests');
    });
  });

  describe('edge cases that are accepted and read back exactly', () => {
    async function roundTrip(payload: unknown): Promise<unknown> {
      const id = await queue.enqueue('edge.case', payload);
      const job = await admin.getJob(id);
      expect(job).not.toBeNull();
      return job!.payload;
    }

    it('SQL-looking strings, as values, keys and tags', async () => {
      const sql = "'; DROP TABLE job; --";
      const payload = { [sql]: sql, also: ["Robert'); DROP TABLE workhorse.job;--", '$1::jsonb', '\\x00', '%s %I'] };
      const id = await queue.enqueue('edge.sql', payload, { tags: [sql] });
      const job = await admin.getJob(id);
      expect(job?.payload).toEqual(payload);
      expect(job?.tags).toEqual([sql]);
      expect(await db.pool.query('SELECT 1 FROM workhorse.job LIMIT 1')).toMatchObject({ rowCount: 1 });
    });

    it('emoji and other astral characters, in values and keys', async () => {
      const payload = { '🔑': '😀 🎉 𝄞 👨‍👩‍👧 🇫🇷', mixed: 'a😀b', cjk: '漢字', rtl: 'مرحبا', combining: 'e\u0301' };
      expect(await roundTrip(payload)).toEqual(payload);
    });

    it('escapes and control characters other than \\u0000', async () => {
      const payload = { s: 'quote " backslash \\ newline \n tab \t \u0001 \u001f \u007f \u2028 \u2029 \ufeff' };
      expect(await roundTrip(payload)).toEqual(payload);
    });

    it('__proto__ as an own key', async () => {
      const payload = JSON.parse('{"__proto__": 1, "constructor": {"prototype": 2}}') as Record<string, unknown>;
      const back = (await roundTrip(payload)) as Record<string, unknown>;
      expect(Object.prototype.hasOwnProperty.call(back, '__proto__')).toBe(true);
      expect(Object.getOwnPropertyDescriptor(back, '__proto__')?.value).toBe(1);
      expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
      expect(back.constructor).toEqual({ prototype: 2 });
    });

    it.each([
      ['1e300', 1e300],
      ['-1.5', -1.5],
      ['2**53 + 2', 2 ** 53 + 2],
      ['Number.MAX_VALUE', Number.MAX_VALUE],
      ['the smallest denormal', 5e-324],
      ['0.1', 0.1],
      ['-1e-300', -1e-300],
    ])('the number %s as the same JS number', async (_label, n) => {
      const back = (await roundTrip({ n, list: [n] })) as { n: number; list: number[] };
      expect(Object.is(back.n, n)).toBe(true);
      expect(Object.is(back.list[0], n)).toBe(true);
    });

    it('nesting 50 levels deep', async () => {
      const payload = nested(50);
      expect(await roundTrip(payload)).toEqual(payload);
    });

    it('a null payload', async () => {
      expect(await roundTrip(null)).toBeNull();
    });

    it.each([
      ['0', 0],
      ['false', false],
      ['an empty string', ''],
      ['an empty array', []],
      ['an empty object', {}],
    ])('the top-level value %s', async (_label, payload) => {
      expect(await roundTrip(payload)).toEqual(payload);
    });

    it('undefined properties are dropped the way JSON.stringify drops them', async () => {
      expect(await roundTrip({ a: 1, b: undefined })).toEqual({ a: 1 });
    });

    it('a payload of exactly 1 MiB of JSON', async () => {
      const payload = 'x'.repeat(MiB - 2); // plus two quotes
      expect(Buffer.byteLength(JSON.stringify(payload))).toBe(MiB);
      expect(await roundTrip(payload)).toBe(payload);
    });

    // 800 001 bytes of compact JSON, but 1 200 000 as jsonb renders it (a space after every
    // comma): both layers must measure the compact text, so it is accepted.
    it('a payload under 1 MiB of JSON made of many small values', async () => {
      const payload = Array.from({ length: 400_000 }, () => 1);
      expect(Buffer.byteLength(JSON.stringify(payload))).toBeLessThan(MiB);
      expect(await roundTrip(payload)).toEqual(payload);
    });
  });
});
