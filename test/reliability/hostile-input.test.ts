/**
 * Hostile input (issue 6, item 6), property-based with fast-check. Whatever a caller passes to
 * enqueue, the outcome is one of exactly two:
 * - accepted, and read back exactly as given (`admin.getJob(id)` returns the same payload and
 *   options), with JSON semantics: the payload is stored as JSON, so -0 reads back as 0 and an
 *   object property whose value is `undefined` is dropped, as `JSON.parse(JSON.stringify(x))`
 *   would do; or
 * - rejected with a typed `WorkhorseValidationError`, and nothing written (row counts unchanged).
 * The generators know which inputs are acceptable, so a library that refused everything (or let
 * everything through) fails too.
 *
 * Then the SQL functions themselves, called directly (as a client in another language would)
 * with arguments of the wrong shape: they refuse with the protocol's own SQLSTATEs (P1001 for
 * invalid input, P1003 for an oversized batch) and write nothing. JSON text that is not JSON at
 * all never reaches our functions: PostgreSQL's jsonb input refuses it first (22P02).
 */
import { inspect, isDeepStrictEqual } from 'node:util';
import fc, { type Arbitrary } from 'fast-check';
import { Client, type DatabaseError } from 'pg';
import {
  IdempotencyConflictError,
  LIMITS,
  WorkhorseValidationError,
  type EnqueueRequest,
  type JobSnapshot,
  type RetryPolicy,
} from '../../lib/core';
import { claimOne, type ClaimedJob } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

// Bounded so that the file stays well under 30 s on a slow CI machine.
const RUNS = 150;

const { db, pool, queue, admin } = useTestDatabase({ beforeDrop: () => sql?.end().catch(() => undefined) });
/**
 * One connection for the calls that may fail (enqueues, passed as their client, and direct SQL
 * calls): a pool discards the connection of every failed query and opens a new one, which
 * would make each refusal cost a login.
 */
let sql: Client;

beforeAll(async () => {
  sql = new Client({ connectionString: db.url });
  sql.on('error', () => undefined);
  await sql.connect();
});

// ---- what is stored ---------------------------------------------------------------------------

const TABLES = [
  'job',
  'job_runtime',
  'job_outcome',
  'job_query',
  'job_event',
  'attempt_history',
  'job_checkpoint',
  'job_wait',
  'enqueue_idempotency',
] as const;
type Counts = Record<(typeof TABLES)[number], number>;

async function rowCounts(): Promise<Counts> {
  const { rows } = await pool.query<Counts>(
    `SELECT ${TABLES.map((t) => `(SELECT count(*)::int FROM workhorse.${t}) AS ${t}`).join(', ')}`,
  );
  return rows[0];
}

function plus(before: Counts, jobs: number): Counts {
  return { ...before, job: before.job + jobs, job_runtime: before.job_runtime + jobs, job_query: before.job_query + jobs, job_event: before.job_event + jobs };
}

/** Runs `call`; resolves with its result, or with the error it threw. */
async function attempt<T>(call: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await call() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** JSON semantics: what a value reads back as once stored as JSON. */
function asJson(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value)) as unknown;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** Text that PostgreSQL can hold: no NUL character, no unpaired UTF-16 surrogate. */
function storableText(text: string): boolean {
  return !text.includes('\u0000') && !LONE_SURROGATE.test(text);
}

/**
 * The contract for payloads (SPEC §7, lib/core/validation.ts LIMITS): plain JSON only (no
 * functions, undefined outside object properties, BigInt, symbols, NaN or Infinity, cycles,
 * holes, or objects other than plain objects and arrays), storable text, at most 100 nested
 * containers, at most 1 MiB as JSON text.
 */
function acceptablePayload(value: unknown): boolean {
  const ancestors = new Set<object>();
  const walk = (node: unknown, depth: number): boolean => {
    if (typeof node === 'string') return storableText(node);
    if (typeof node === 'number') return Number.isFinite(node);
    if (typeof node === 'boolean' || node === null) return true;
    if (typeof node !== 'object') return false;
    if (depth >= LIMITS.jsonDepth || ancestors.has(node)) return false;
    ancestors.add(node);
    let ok: boolean;
    if (Array.isArray(node)) {
      ok = Object.getPrototypeOf(node) === Array.prototype;
      for (let i = 0; ok && i < node.length; i++) ok = i in node && walk(node[i], depth + 1);
    } else {
      const proto = Object.getPrototypeOf(node) as unknown;
      ok = (proto === Object.prototype || proto === null) && Object.getOwnPropertySymbols(node).length === 0;
      for (const key of ok ? Object.keys(node) : []) {
        const child = (node as Record<string, unknown>)[key];
        ok = storableText(key) && (child === undefined || walk(child, depth + 1));
        if (!ok) break;
      }
    }
    ancestors.delete(node);
    return ok;
  };
  return walk(value, 0) && Buffer.byteLength(JSON.stringify(value), 'utf8') <= LIMITS.jsonBytes;
}

// The field names the offending input; it may be empty only for an option key that is itself
// the empty string.
function expectTypedRejection(error: unknown): void {
  expect(error).toBeInstanceOf(WorkhorseValidationError);
  expect(typeof (error as WorkhorseValidationError).field).toBe('string');
}

// ---- generators -------------------------------------------------------------------------------

/** A generated input and whether the contract accepts it. */
interface Case<T = unknown> {
  value: T;
  valid: boolean;
}
const ok = <T>(arb: Arbitrary<T>): Arbitrary<Case<T>> => arb.map((value) => ({ value, valid: true }));
const bad = <T>(arb: Arbitrary<T>): Arbitrary<Case<unknown>> => arb.map((value): Case<unknown> => ({ value, valid: false }));
const absent: Arbitrary<Case<undefined>> = fc.constant({ value: undefined, valid: true });

const SQLISH = [
  "'; DROP TABLE workhorse.job; --",
  "' OR '1'='1",
  '"); DELETE FROM workhorse.job_runtime; --',
  '$$; SELECT pg_sleep(10); $$',
  '$1',
  '%s %I %L',
  '\\x00',
  "E'\\\\'",
  'NULL',
  '{a,b}',
  '{"a":1}',
  '\\',
  '"',
  "'",
  '/* */',
  '; COMMIT; BEGIN;',
  'ROLLBACK',
  'workhorse.job',
  '::jsonb',
  '\u202e\u200b\ufeff',
];

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:/-]*$/;
const validName = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,30}$/),
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:/-]{100,127}$/),
);
const badName: Arbitrary<unknown> = fc.oneof(
  fc.constant(''),
  // 129 to 200 characters: one over the limit and beyond.
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:/-]{128,199}$/),
  fc.constantFrom(...SQLISH.filter((s) => !NAME.test(s)), 'a b', '-leading', '.hidden', '_x', 'caf\u00e9', 'x\u0000', 'x\ud800', 'tab\tname', '😀'),
  fc.string({ unit: 'binary', maxLength: 40 }).filter((s) => !NAME.test(s) || s.length > 128),
  fc.constantFrom<unknown>(null, 0, 1, true, {}, ['name'], 12n),
);

/** One code point of any plane except the surrogate range and NUL. */
const codePoint = fc
  .integer({ min: 1, max: 0x10ffff })
  .filter((c) => c < 0xd800 || c > 0xdfff)
  .map((c) => String.fromCodePoint(c));
const text = (maxLength: number, minLength = 0): Arbitrary<string> =>
  fc.oneof(
    fc.string({ minLength, maxLength }),
    fc.string({ unit: codePoint, minLength, maxLength }),
    fc.constantFrom(...SQLISH.filter((s) => [...s].length >= minLength && [...s].length <= maxLength)),
  );

const dateRange = (min: string, max: string) => fc.date({ min: new Date(min), max: new Date(max), noInvalidDate: true });
const dateCase: Arbitrary<Case> = fc.oneof(
  ok(dateRange('1970-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z')),
  ok(fc.integer({ min: -60_000, max: 3_600_000 }).map((ms) => new Date(Date.now() + ms))),
  bad(fc.constant(new Date(Number.NaN))),
  bad(dateRange('0001-01-01T00:00:00.000Z', '1969-12-31T23:59:59.999Z')),
  bad(dateRange('+010000-01-01T00:00:00.000Z', '+200000-01-01T00:00:00.000Z')),
  bad(fc.constantFrom<unknown>('2030-01-01T00:00:00Z', 1_900_000_000_000, null, {}, true)),
  absent,
);

const intCase = (min: number, max: number): Arbitrary<Case> =>
  fc.oneof(
    ok(fc.integer({ min, max })),
    ok(fc.constantFrom(min, max)),
    bad(fc.integer({ min: min - 1000, max: min - 1 })),
    bad(fc.integer({ min: max + 1, max: max + 1000 })),
    bad(fc.constantFrom<unknown>(min - 1, max + 1, min + 0.5, Number.NaN, Infinity, -Infinity, Number.MAX_VALUE, String(min), null, [min], 1n)),
    bad(fc.double({ noInteger: true })),
    absent,
  );

const priorityCase: Arbitrary<Case> = fc.oneof(intCase(0, 100), ok(fc.constant(-0)));

const tagCase: Arbitrary<Case> = fc.oneof(
  ok(fc.array(text(64, 1), { maxLength: 20 })),
  ok(fc.constantFrom(['😀'.repeat(64)], Array.from({ length: 20 }, (_, i) => `t${i}`), [...SQLISH])),
  bad(fc.constantFrom<unknown>(
    Array.from({ length: 21 }, (_, i) => `t${i}`),
    [''],
    ['a'.repeat(65)],
    ['😀'.repeat(65)],
    ['x\u0000'],
    ['x\udc00'],
    [1],
    [null],
    'tag',
    { 0: 'a' },
    null,
  )),
  absent,
);

const DEFAULT_EXPONENTIAL = { kind: 'exponential', initialMs: 1000, multiplier: 2, maxMs: 3_600_000, jitter: true };
const delay = fc.integer({ min: 0, max: 604_800_000 });
const retryCase: Arbitrary<Case> = fc.oneof(
  ok(fc.record({ kind: fc.constant('fixed' as const), delayMs: delay }, { requiredKeys: ['kind'] })),
  fc
    .record(
      {
        kind: fc.constant('exponential' as const),
        initialMs: delay,
        multiplier: fc.double({ min: 1, max: 10, noNaN: true }),
        maxMs: delay,
        jitter: fc.boolean(),
      },
      { requiredKeys: ['kind'] },
    )
    .map((policy) => ({ value: policy, valid: (policy.maxMs ?? 3_600_000) >= (policy.initialMs ?? 1000) })),
  bad(fc.constantFrom<unknown>(
    { kind: 'linear' },
    { kind: 'fixed', delayMs: -1 },
    { kind: 'fixed', delayMs: 604_800_001 },
    { kind: 'fixed', delayMs: 1.5 },
    { kind: 'fixed', initialMs: 5 },
    { kind: 'exponential', multiplier: 0.5 },
    { kind: 'exponential', multiplier: 11 },
    { kind: 'exponential', multiplier: Number.NaN },
    { kind: 'exponential', multiplier: '2' },
    { kind: 'exponential', jitter: 'yes' },
    { kind: 'exponential', initialMs: 5000, maxMs: 10 },
    { delayMs: 10 },
    null,
    'fixed',
    [],
    5,
  )),
  absent,
);

const OPTION_KEYS = ['queue', 'priority', 'runAt', 'maxAttempts', 'retryPolicy', 'tags', 'deadline', 'executionTimeoutMs'] as const;
const KNOWN_KEYS = new Set<string>([...OPTION_KEYS, 'idempotencyKey', 'idempotencyScope', 'idempotencyTtlMs']);
const unknownKey = fc
  .oneof(
    fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'payload', 'type', 'Queue', 'run_at', 'priority ', ''),
    fc.string({ maxLength: 20 }),
  )
  .filter((key) => !KNOWN_KEYS.has(key));

/** Sets an own, enumerable property, even one named `__proto__`. */
function define(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

interface OptionsCase {
  options: unknown;
  valid: boolean;
  /** The option values given (undefined ones included), when `options` is an object. */
  given: Partial<Record<(typeof OPTION_KEYS)[number], unknown>>;
}

const optionsCase: Arbitrary<OptionsCase> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .tuple(
        fc.record(
          {
            queue: fc.oneof(ok(validName), bad(badName), absent),
            priority: priorityCase,
            runAt: dateCase,
            maxAttempts: intCase(1, 100),
            retryPolicy: retryCase,
            tags: tagCase,
            deadline: dateCase,
            executionTimeoutMs: intCase(1000, 86_400_000),
          },
          { requiredKeys: [] },
        ),
        fc.option(fc.tuple(unknownKey, fc.anything()), { freq: 6 }),
        // idempotencyScope or idempotencyTtlMs without an idempotencyKey.
        fc.option(fc.constantFrom<[string, unknown]>(['idempotencyScope', 'scope'], ['idempotencyTtlMs', 5000]), { freq: 10 }),
      )
      .map(([fields, extra, orphan]) => {
        const options: Record<string, unknown> = {};
        const given: OptionsCase['given'] = {};
        let valid = true;
        for (const key of OPTION_KEYS) {
          const field = fields[key];
          if (field === undefined) continue;
          define(options, key, field.value);
          given[key] = field.value;
          valid &&= field.valid;
        }
        if (extra) {
          define(options, extra[0], extra[1]);
          valid = false;
        }
        if (orphan) {
          define(options, orphan[0], orphan[1]);
          valid = false;
        }
        return { options, valid, given };
      }),
  },
  { weight: 1, arbitrary: fc.constantFrom<OptionsCase>({ options: undefined, valid: true, given: {} }, { options: null, valid: true, given: {} }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>('queue', 5, true, [], [{ queue: 'x' }]).map((options) => ({ options, valid: false, given: {} })) },
);

function expectedPolicy(policy: unknown): RetryPolicy | null {
  if (policy === undefined) return null;
  const given = policy as Record<string, unknown>;
  if (given.kind === 'fixed') return { kind: 'fixed', delayMs: (given.delayMs as number | undefined) ?? 1000 };
  return { ...DEFAULT_EXPONENTIAL, ...asJson(given) as object } as RetryPolicy;
}

/** Checks an accepted job against what was given. */
// Deep, strict equality of JSON read back. Not Jest's toStrictEqual: it also compares each
// object's `constructor` property, so it calls two equal objects that have an own key
// "constructor" different.
function expectSameJson(actual: unknown, expected: unknown): void {
  if (!isDeepStrictEqual(actual, expected)) {
    throw new Error(`read back ${inspect(actual, { depth: 8 })}, expected ${inspect(expected, { depth: 8 })}`);
  }
}

function expectReadBack(job: JobSnapshot | null, type: string, payload: unknown, given: OptionsCase['given']): void {
  expect(job).not.toBeNull();
  const snapshot = job as JobSnapshot;
  expect(snapshot.type).toBe(type);
  expectSameJson(snapshot.payload, asJson(payload));
  expect(snapshot.queue).toBe(given.queue ?? 'default');
  expect(snapshot.priority).toBe(given.priority === undefined ? 0 : asJson(given.priority));
  expect(snapshot.maxAttempts).toBe(given.maxAttempts ?? 25);
  expect(snapshot.tags).toStrictEqual(given.tags ?? []);
  expect(snapshot.retryPolicy).toStrictEqual(expectedPolicy(given.retryPolicy));
  expect(snapshot.executionTimeoutMs).toBe(given.executionTimeoutMs ?? null);
  expect(snapshot.deadline?.getTime() ?? null).toBe(given.deadline === undefined ? null : (given.deadline as Date).getTime());
  // A due time in the past means now (the enqueue's own clock reading, which is createdAt).
  const due = given.runAt === undefined ? snapshot.createdAt.getTime() : Math.max((given.runAt as Date).getTime(), snapshot.createdAt.getTime());
  expect(snapshot.runAt.getTime()).toBe(due);
  expect(snapshot.state).toBe(due > snapshot.createdAt.getTime() ? 'scheduled' : 'ready');
  expect(snapshot.currentAttempt).toBe(0);
}

// ---- enqueue through the TypeScript client ----------------------------------------------------

/** Enqueues one job and checks the accepted-or-rejected dichotomy; `valid` is the generator's verdict. */
async function checkEnqueue(type: unknown, payload: unknown, options: OptionsCase, valid: boolean): Promise<void> {
  const before = await rowCounts();
  const result = await attempt(() => queue.enqueue(type as string, payload, options.options as undefined, sql));
  if (result.ok) {
    expect({ accepted: true, expected: valid }).toEqual({ accepted: true, expected: true });
    expectReadBack(await admin.getJob(result.value), type as string, payload, options.given);
    expect(await rowCounts()).toEqual(plus(before, 1));
  } else {
    expectTypedRejection(result.error);
    expect({ rejected: String(result.error), expected: valid }).toEqual({ rejected: String(result.error), expected: false });
    expect(await rowCounts()).toEqual(before);
  }
}

const NO_OPTIONS: OptionsCase = { options: undefined, valid: true, given: {} };

describe('enqueue with hostile payloads', () => {
  it('fc.jsonValue() (unicode, NUL and lone surrogates included) is stored and read back, or refused', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue({ stringUnit: 'binary', maxDepth: 6 }), async (payload) => {
        await checkEnqueue('hostile.json', payload, NO_OPTIONS, acceptablePayload(payload));
      }),
      { numRuns: RUNS },
    );
  });

  it('fc.anything() is stored and read back, or refused', async () => {
    await fc.assert(
      fc.asyncProperty(fc.anything(), async (payload) => {
        await checkEnqueue('hostile.anything', payload, NO_OPTIONS, acceptablePayload(payload));
      }),
      { numRuns: RUNS },
    );
  });

  it('fc.anything() with object strings, boxed values, maps, sets, dates, BigInt, typed and sparse arrays, null prototypes and __proto__ keys', async () => {
    const hostile = fc.anything({
      withObjectString: true,
      withBoxedValues: true,
      withMap: true,
      withSet: true,
      withNullPrototype: true,
      withBigInt: true,
      withDate: true,
      withTypedArray: true,
      withSparseArray: true,
      stringUnit: 'binary',
      key: fc.oneof(fc.string(), fc.constantFrom('__proto__', 'constructor', 'prototype', 'toJSON', '')),
      maxDepth: 4,
    });
    await fc.assert(
      fc.asyncProperty(hostile, async (payload) => {
        await checkEnqueue('hostile.anything', payload, NO_OPTIONS, acceptablePayload(payload));
      }),
      { numRuns: RUNS },
    );
  });

  it('SQL-looking strings, huge and tiny numbers, -0, NUL, lone surrogates and __proto__ keys', async () => {
    const numbers = fc.oneof(
      fc.constantFrom(-0, Number.MAX_VALUE, -Number.MAX_VALUE, Number.MIN_VALUE, Number.MAX_SAFE_INTEGER + 2, 1e21, 1e-7, 123456789.123456789, Number.NaN, Infinity),
      fc.double(),
      fc.integer(),
    );
    const strings = fc.oneof(
      fc.constantFrom(...SQLISH, '\u0000', 'a\u0000b', '\ud800', 'x\udfffy', '\ud83d\ude00', '\uffff', 'x'.repeat(10_000)),
      fc.string({ unit: 'binary' }),
    );
    const leaf = fc.oneof(numbers, strings, fc.boolean(), fc.constant(null));
    const keyed = fc
      .tuple(fc.oneof(strings, fc.constantFrom('__proto__', 'constructor', 'hasOwnProperty')), leaf, leaf)
      .map(([key, value, other]) => {
        const object: Record<string, unknown> = { other };
        define(object, key, value);
        return object;
      });
    await fc.assert(
      fc.asyncProperty(fc.oneof(leaf, keyed, fc.array(fc.oneof(leaf, keyed), { maxLength: 5 })), async (payload) => {
        await checkEnqueue('hostile.mixed', payload, NO_OPTIONS, acceptablePayload(payload));
      }),
      { numRuns: RUNS },
    );
  });

  it('deep nesting: up to 100 nested containers are stored, deeper is refused', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 140 }), fc.boolean(), async (levels, objects) => {
        let payload: unknown = 'bottom';
        for (let i = 0; i < levels; i++) payload = objects && i % 2 === 0 ? { down: payload } : [payload];
        await checkEnqueue('hostile.deep', payload, NO_OPTIONS, levels <= LIMITS.jsonDepth);
      }),
      { numRuns: 40 },
    );
  });

  it('sizes around 1 MiB, in one- to four-byte characters, are refused exactly above the limit', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('a', '\u00e9', '\u20ac', '\ud83d\ude00'), fc.integer({ min: -8, max: 8 }), async (char, offset) => {
        const bytesPerChar = Buffer.byteLength(char, 'utf8');
        // A JSON string: its text is the characters plus two quotes.
        const count = Math.floor((LIMITS.jsonBytes - 2) / bytesPerChar) + offset;
        const payload = char.repeat(count);
        await checkEnqueue('hostile.size', payload, NO_OPTIONS, count * bytesPerChar + 2 <= LIMITS.jsonBytes);
      }),
      { numRuns: 8 },
    );
  });
});

describe('payloads whose PostgreSQL rendering is much longer than their JSON text', () => {
  // The server measures values as JSON.stringify would write them, not as PostgreSQL renders
  // them (every digit of 1e308 written out): 4000 copies are 28 KB of JSON and must be accepted.
  it.each([
    ['1e308', Number.MAX_VALUE],
    ['5e-324', Number.MIN_VALUE],
  ])('%s repeated is accepted while its JSON text is far below 1 MiB', async (_label, value) => {
    const payload = Array.from({ length: 4000 }, () => value);
    expect(Buffer.byteLength(JSON.stringify(payload), 'utf8')).toBeLessThan(LIMITS.jsonBytes / 10);
    await checkEnqueue('hostile.numbers', payload, NO_OPTIONS, true);
  });
});

describe('enqueue with hostile names and options', () => {
  it('arbitrary types and option records mixing valid and invalid keys and values', async () => {
    const typeCase: Arbitrary<Case> = fc.oneof({ weight: 4, arbitrary: ok(validName) }, { weight: 1, arbitrary: bad(fc.oneof(badName, fc.constant(undefined))) });
    await fc.assert(
      fc.asyncProperty(typeCase, fc.jsonValue({ maxDepth: 3 }), optionsCase, async (type, payload, options) => {
        await checkEnqueue(type.value, payload, options, type.valid && options.valid);
      }),
      { numRuns: RUNS },
    );
  });

  it('batches are all or nothing: one bad request refuses the whole batch', async () => {
    const request = fc.tuple(fc.oneof({ weight: 6, arbitrary: ok(validName) }, { weight: 1, arbitrary: bad(badName) }), fc.jsonValue({ maxDepth: 2 }), optionsCase).map(
      ([type, payload, options]) => {
        // A request carries its options as its own fields; options that are not a record
        // cannot be written that way, so such a request has none.
        const isRecord = typeof options.options === 'object' && options.options !== null && !Array.isArray(options.options);
        const fields = isRecord ? (options.options as Record<string, unknown>) : {};
        const wire: Record<string, unknown> = { type: type.value, payload };
        for (const key of Object.keys(fields)) define(wire, key, fields[key]);
        const valid = type.valid && (!isRecord || options.valid);
        return { request: wire, valid, given: isRecord ? options.given : {}, type: type.value, payload };
      },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(request, { minLength: 1, maxLength: 6 }), async (batch) => {
        const before = await rowCounts();
        const valid = batch.every((r) => r.valid);
        const result = await attempt(() => queue.enqueueMany(batch.map((r) => r.request) as unknown as EnqueueRequest[], sql));
        if (result.ok) {
          expect({ accepted: true, expected: valid }).toEqual({ accepted: true, expected: true });
          expect(result.value).toHaveLength(batch.length);
          for (const [i, id] of result.value.entries()) {
            expectReadBack(await admin.getJob(id), batch[i].type as string, batch[i].payload, batch[i].given);
          }
          expect(await rowCounts()).toEqual(plus(before, batch.length));
        } else {
          expectTypedRejection(result.error);
          expect({ rejected: String(result.error), expected: valid }).toEqual({ rejected: String(result.error), expected: false });
          expect(await rowCounts()).toEqual(before);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('idempotency keys: any storable key of 1 to 512 characters is kept, repeats write nothing, conflicts write nothing', async () => {
    let serial = 0;
    const keyCase: Arbitrary<Case<string>> = fc.oneof(
      fc.string({ unit: codePoint, maxLength: 40 }).map((s) => ({ value: s, valid: true })),
      fc.constantFrom(...SQLISH).map((s) => ({ value: s, valid: true })),
      fc.integer({ min: 480, max: 540 }).map((n) => ({ value: '😀'.repeat(n), valid: true })),
      fc.constantFrom('\u0000', 'a\ud800').map((s) => ({ value: s, valid: false })),
    );
    await fc.assert(
      fc.asyncProperty(keyCase, fc.jsonValue({ maxDepth: 2 }), async (key, payload) => {
        serial += 1;
        // A prefix unique to this run, so that runs never replay each other's keys.
        const idempotencyKey = `run${serial}:${key.value}`;
        const valid = key.valid && [...idempotencyKey].length <= 512;
        const options = { queue: 'hostile-keys', idempotencyKey };
        const before = await rowCounts();
        const first = await attempt(() => queue.enqueue('hostile.keyed', payload, options, sql));
        if (!first.ok) {
          expectTypedRejection(first.error);
          expect({ rejected: String(first.error), expected: valid }).toEqual({ rejected: String(first.error), expected: false });
          expect(await rowCounts()).toEqual(before);
          return;
        }
        expect({ accepted: true, expected: valid }).toEqual({ accepted: true, expected: true });
        const after = await rowCounts();
        expect(after).toEqual({ ...plus(before, 1), enqueue_idempotency: before.enqueue_idempotency + 1 });
        expect(await queue.enqueue('hostile.keyed', payload, options, sql)).toBe(first.value);
        const conflict = await attempt(() => queue.enqueue('hostile.keyed', { different: payload }, options, sql));
        expect(conflict.ok ? 'accepted' : conflict.error).toBeInstanceOf(IdempotencyConflictError);
        expect(await rowCounts()).toEqual(after);
        expectSameJson((await admin.getJob(first.value))?.payload, asJson(payload));
      }),
      { numRuns: 80 },
    );
  });
});

// ---- the SQL functions, called directly -------------------------------------------------------

async function sqlstate(text: string, values: unknown[]): Promise<string> {
  try {
    await sql.query(text, values);
    return 'succeeded';
  } catch (error) {
    return (error as DatabaseError).code ?? `no SQLSTATE: ${String(error)}`;
  }
}

/** A job enqueued and claimed by a worker of this test; its runtime row must not change under bad calls. */
async function ownedJob(queueName: string): Promise<ClaimedJob> {
  const jobId = await queue.enqueue('hostile.owned', { owned: true }, { queue: queueName });
  const owned = await claimOne(pool, queueName, { workerId: `hostile-worker-${queueName}`, leaseMs: 600_000 });
  expect(owned.jobId).toBe(jobId);
  return owned;
}

async function runtimeRow(jobId: string): Promise<unknown> {
  const { rows } = await pool.query('SELECT to_jsonb(r) AS row FROM workhorse.job_runtime r WHERE job_id = $1', [jobId]);
  return rows[0]?.row;
}

/** Every call must fail with `code` and leave every table and the owned job's row as they were. */
async function expectRefusedWithoutWrites(
  owned: ClaimedJob | null,
  calls: { text: string; values: unknown[] }[],
  code = 'P1001',
): Promise<void> {
  const before = await rowCounts();
  const row = owned ? await runtimeRow(owned.jobId) : null;
  const outcomes: Record<string, string> = {};
  for (const [i, call] of calls.entries()) outcomes[`${i}: ${call.text} ${JSON.stringify(call.values).slice(0, 200)}`] = await sqlstate(call.text, call.values);
  expect(outcomes).toEqual(Object.fromEntries(Object.keys(outcomes).map((key) => [key, code])));
  expect(await rowCounts()).toEqual(before);
  if (owned) expect(await runtimeRow(owned.jobId)).toEqual(row);
}

const ENQUEUE = 'SELECT * FROM workhorse.enqueue_many_v1($1::jsonb)';
const CLAIM = 'SELECT * FROM workhorse.claim_many_v1($1, $2, $3, $4)';
const HEARTBEAT = 'SELECT * FROM workhorse.heartbeat_many_v1($1, $2::jsonb, $3)';
const COMPLETE = 'SELECT * FROM workhorse.complete_many_v1($1, $2::jsonb)';
const FAIL = 'SELECT * FROM workhorse.fail_v1($1, $2, $3, $4::jsonb, $5::jsonb)';
const CHECKPOINT = 'SELECT workhorse.save_checkpoint_v1($1, $2, $3, $4, $5::jsonb)';
const MIB = 'x'.repeat(LIMITS.jsonBytes);

describe('the SQL functions called directly with malformed arguments', () => {
  it('enqueue_many_v1 refuses what is not a batch of valid requests (P1001, P1003 over 1000) and writes nothing', async () => {
    const good = { type: 'sql.ok', payload: {} };
    const batches: unknown[] = [
      {},
      'requests',
      42,
      null,
      [1],
      [null],
      [[good]],
      [{}],
      [{ type: 'sql.ok' }],
      [{ payload: 1 }],
      [{ type: '', payload: 1 }],
      [{ type: "x'; DROP TABLE workhorse.job; --", payload: 1 }],
      [{ type: 'a'.repeat(129), payload: 1 }],
      [{ type: 7, payload: 1 }],
      [{ ...good, queue: 'bad queue' }],
      [{ ...good, priority: 101 }],
      [{ ...good, priority: -1 }],
      [{ ...good, priority: 1.5 }],
      [{ ...good, priority: '5' }],
      [{ ...good, priority: 1e300 }],
      [{ ...good, maxAttempts: 0 }],
      [{ ...good, runAt: 'tomorrow' }],
      [{ ...good, runAt: '2030-02-30T00:00:00Z' }],
      [{ ...good, runAt: '2030-01-01T00:00:00' }],
      [{ ...good, runAt: 1_900_000_000 }],
      [{ ...good, deadline: '2030-13-01T00:00:00Z' }],
      [{ ...good, tags: 'tag' }],
      [{ ...good, tags: [1] }],
      [{ ...good, tags: [''] }],
      [{ ...good, tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }],
      [{ ...good, retryPolicy: { kind: 'linear' } }],
      [{ ...good, retryPolicy: { kind: 'fixed', delayMs: -5 } }],
      [{ ...good, retryPolicy: 'fixed' }],
      [{ ...good, executionTimeoutMs: 999 }],
      [{ ...good, idempotencyKey: '' }],
      [{ ...good, idempotencyKey: 7 }],
      [{ ...good, idempotencyScope: 'scope' }],
      [{ ...good, idempotencyTtlMs: 5000 }],
      [{ ...good, unknown: true }],
      [{ ...good, payload: MIB }],
      // All or nothing: good requests before and after a bad one are not written either.
      [good, good, { ...good, priority: 'high' }, good],
    ];
    await expectRefusedWithoutWrites(
      null,
      batches.map((batch) => ({ text: ENQUEUE, values: [JSON.stringify(batch)] })),
    );
    await expectRefusedWithoutWrites(null, [{ text: ENQUEUE, values: [null] }]);
    await expectRefusedWithoutWrites(null, [{ text: ENQUEUE, values: [JSON.stringify(Array.from({ length: 1001 }, () => good))] }], 'P1003');
  });

  // Other languages' JSON encoders write whole numbers as 50.0 or 2.50e1; they are integers.
  it('enqueue_many_v1 accepts (or refuses with P1001) integral numbers written as 50.0 or 2.50e1, never 22P02', async () => {
    const fields = ['"priority": 50.0', '"maxAttempts": 2.50e1', '"executionTimeoutMs": 1000.0', '"idempotencyKey": "k-50.0", "idempotencyTtlMs": 5000.0'];
    const outcomes: Record<string, string> = {};
    for (const field of fields) {
      outcomes[field] = await sqlstate(ENQUEUE, [`[{"type": "sql.fraction", "payload": 1, "queue": "sql-fraction", ${field}}]`]);
    }
    for (const field of fields) expect([field, ['succeeded', 'P1001'].includes(outcomes[field])]).toEqual([field, true]);
  });

  it('enqueue_many_v1 over arbitrary JSON: refuses with P1001 or P1003, or stores the jobs as given, never another error', async () => {
    const requestish = fc.oneof(
      fc.jsonValue({ maxDepth: 3, stringUnit: 'grapheme' }),
      fc.record(
        {
          type: fc.oneof(validName, fc.jsonValue({ maxDepth: 1 })),
          payload: fc.jsonValue({ maxDepth: 2, stringUnit: 'grapheme' }),
          queue: fc.oneof(validName, fc.jsonValue({ maxDepth: 1 })),
          priority: fc.oneof(fc.integer({ min: -5, max: 105 }), fc.jsonValue({ maxDepth: 1 })),
          maxAttempts: fc.oneof(fc.integer({ min: -5, max: 105 }), fc.jsonValue({ maxDepth: 1 })),
          tags: fc.oneof(fc.array(fc.string({ minLength: 1, maxLength: 10 }), { maxLength: 3 }), fc.jsonValue({ maxDepth: 1 })),
          retryPolicy: fc.oneof(fc.constant({ kind: 'fixed', delayMs: 5 }), fc.jsonValue({ maxDepth: 2 })),
          runAt: fc.oneof(fc.constant('2031-05-06T07:08:09.123Z'), fc.jsonValue({ maxDepth: 1 })),
        },
        { requiredKeys: [] },
      ),
    );
    // Strings PostgreSQL's jsonb input accepts (no NUL, no lone surrogates), so every call
    // reaches enqueue_many_v1 itself.
    const batch = fc.oneof(fc.array(requestish, { maxLength: 4 }), fc.jsonValue({ maxDepth: 2 })).filter((value) => acceptablePayload(value));
    await fc.assert(
      fc.asyncProperty(batch, async (requests) => {
        const before = await rowCounts();
        let ids: string[] = [];
        let code = 'succeeded';
        try {
          const { rows } = await sql.query<{ job_id: string }>(ENQUEUE, [JSON.stringify(requests)]);
          ids = rows.map((r) => r.job_id);
        } catch (error) {
          code = (error as DatabaseError).code ?? String(error);
        }
        expect(['succeeded', 'P1001', 'P1003']).toContain(code);
        if (code !== 'succeeded') {
          expect(await rowCounts()).toEqual(before);
          return;
        }
        const list = requests as { type: string; payload: unknown }[];
        expect(ids).toHaveLength(list.length);
        for (const [i, id] of ids.entries()) {
          const job = await admin.getJob(id);
          expect({ type: job?.type, payload: job?.payload }).toStrictEqual({ type: list[i].type, payload: list[i].payload });
        }
        expect(await rowCounts()).toEqual(plus(before, list.length));
      }),
      { numRuns: RUNS },
    );
  });

  it('claim_many_v1 refuses bad queues, workers, limits and leases', async () => {
    const queues = ['sql-claim'];
    const args: unknown[][] = [
      [null, 'w', 1, 1000],
      [[], 'w', 1, 1000],
      [Array.from({ length: 101 }, (_, i) => `q${i}`), 'w', 1, 1000],
      [[''], 'w', 1, 1000],
      [['bad queue'], 'w', 1, 1000],
      [["q'; DROP TABLE workhorse.job; --"], 'w', 1, 1000],
      [[null], 'w', 1, 1000],
      [['a'.repeat(129)], 'w', 1, 1000],
      [queues, null, 1, 1000],
      [queues, '', 1, 1000],
      [queues, 'w'.repeat(201), 1, 1000],
      [queues, 'w', null, 1000],
      [queues, 'w', 0, 1000],
      [queues, 'w', 1001, 1000],
      [queues, 'w', -1, 1000],
      [queues, 'w', 1, null],
      [queues, 'w', 1, 999],
      [queues, 'w', 1, 86_400_001],
    ];
    await queue.enqueue('sql.claimable', {}, { queue: 'sql-claim' });
    await expectRefusedWithoutWrites(null, args.map((values) => ({ text: CLAIM, values })));
    await admin.cancel((await admin.listJobs({ queue: 'sql-claim' })).items[0].id);
  });

  it('heartbeat_many_v1 and complete_many_v1 refuse non-arrays and bad items, even from the owner', async () => {
    const owned = await ownedJob('sql-owner-batch');
    const item = { jobId: owned.jobId, fence: Number(owned.fence) };
    const badItems: unknown[] = [
      {},
      item,
      'leases',
      7,
      null,
      [1],
      [null],
      [[item]],
      [{}],
      [{ jobId: owned.jobId }],
      [{ fence: item.fence }],
      [{ ...item, jobId: 'not-a-uuid' }],
      [{ ...item, jobId: `${owned.jobId}'; DROP TABLE workhorse.job; --` }],
      [{ ...item, jobId: 42 }],
      // Forms PostgreSQL's uuid input accepts but a job id is not: braces, and 36 characters
      // with the hyphens elsewhere.
      [{ ...item, jobId: `{${owned.jobId}}` }],
      [{ ...item, jobId: `${owned.jobId.slice(0, 8)}-${owned.jobId.slice(9, 13)}${owned.jobId.slice(14, 18)}-${owned.jobId.slice(19, 23)}-${owned.jobId.slice(24, 32)}-${owned.jobId.slice(32)}` }],
      [{ ...item, fence: 0 }],
      [{ ...item, fence: -1 }],
      [{ ...item, fence: 1.5 }],
      [{ ...item, fence: String(item.fence) }],
      [{ ...item, fence: 1e30 }],
      [{ ...item, fence: null }],
      // A bad item anywhere refuses the whole batch, the owner's good item included.
      [item, { ...item, fence: 'x' }],
      Array.from({ length: 1001 }, () => item),
    ];
    await expectRefusedWithoutWrites(owned, [
      ...badItems.map((items) => ({ text: HEARTBEAT, values: [owned.workerId, items === null ? null : JSON.stringify(items), 60_000] })),
      { text: HEARTBEAT, values: [owned.workerId, JSON.stringify([item]), 999] },
      { text: HEARTBEAT, values: [owned.workerId, JSON.stringify([item]), null] },
      { text: HEARTBEAT, values: ['', JSON.stringify([item]), 60_000] },
      { text: HEARTBEAT, values: [null, JSON.stringify([item]), 60_000] },
      ...badItems.map((items) => ({
        text: COMPLETE,
        values: [owned.workerId, items === null ? null : JSON.stringify(Array.isArray(items) ? items.map((i) => (typeof i === 'object' && i !== null && !Array.isArray(i) ? { ...i, result: 1 } : i)) : items)],
      })),
      { text: COMPLETE, values: [owned.workerId, JSON.stringify([{ ...item, result: 1 }, { ...item, result: 2 }])] },
      { text: COMPLETE, values: [owned.workerId, JSON.stringify([{ ...item, result: MIB }])] },
      { text: COMPLETE, values: ['w'.repeat(201), JSON.stringify([{ ...item, result: 1 }])] },
    ]);
    // The owner's lease is intact: a proper heartbeat and completion still work.
    const { rows } = await pool.query<{ status: string }>(HEARTBEAT, [owned.workerId, JSON.stringify([item]), 60_000]);
    expect(rows.map((r) => r.status)).toEqual(['accepted']);
    // A job id in capitals is the same id.
    const done = await pool.query<{ status: string }>(COMPLETE, [
      owned.workerId,
      JSON.stringify([{ ...item, jobId: owned.jobId.toUpperCase(), result: 'fine' }]),
    ]);
    expect(done.rows.map((r) => r.status)).toEqual(['succeeded']);
  });

  it('heartbeat_many_v1, complete_many_v1 and fail_v1 over arbitrary JSON: P1001 or an answer, never another error, never a write by a stranger', async () => {
    const owned = await ownedJob('sql-owner-fuzz');
    const json = fc.jsonValue({ maxDepth: 3, stringUnit: 'grapheme' }).filter((value) => acceptablePayload(value));
    const items = fc.oneof(
      json,
      fc.array(
        fc.record(
          {
            jobId: fc.oneof(fc.constant(owned.jobId), fc.uuid(), json),
            fence: fc.oneof(fc.constant(Number(owned.fence)), fc.integer(), json),
            result: json,
          },
          { requiredKeys: [] },
        ),
        { maxLength: 3 },
      ),
    );
    const envelope = fc.oneof(json, fc.record({ name: fc.oneof(fc.string(), json), message: fc.oneof(fc.string(), json), stack: json }, { requiredKeys: [] }));
    const options = fc.oneof(
      json,
      fc.record(
        {
          retryDelayMs: fc.oneof(fc.integer({ min: -5, max: 604_800_005 }), json),
          nonRetryable: fc.oneof(fc.boolean(), json),
          attemptOutcome: fc.oneof(fc.constantFrom('failed', 'timeout', 'crashed'), json),
          retryPolicy: fc.oneof(fc.constant({ kind: 'fixed', delayMs: 1 }), json),
        },
        { requiredKeys: [] },
      ),
    );
    // Calls from another worker id: whatever their shape, they may only answer `stale` (or be
    // refused), never change the owned job.
    const stranger = 'hostile-stranger';
    await fc.assert(
      fc.asyncProperty(items, envelope, options, async (leases, error, failOptions) => {
        const before = await rowCounts();
        const row = await runtimeRow(owned.jobId);
        const codes = [
          await sqlstate(HEARTBEAT, [stranger, JSON.stringify(leases), 60_000]),
          await sqlstate(COMPLETE, [stranger, JSON.stringify(leases)]),
          await sqlstate(FAIL, [owned.jobId, stranger, owned.fence, JSON.stringify(error), JSON.stringify(failOptions)]),
        ];
        for (const code of codes) expect(['succeeded', 'P1001']).toContain(code);
        expect(await rowCounts()).toEqual(before);
        expect(await runtimeRow(owned.jobId)).toEqual(row);
      }),
      { numRuns: 100 },
    );
    expect(await admin.cancel(owned.jobId)).toBe('cancel_requested');
    await pool.query('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3)', [owned.jobId, owned.workerId, owned.fence]);
  });

  it('fail_v1 refuses a bad error envelope or bad options from the owner, and changes nothing', async () => {
    const owned = await ownedJob('sql-owner-fail');
    const envelope = { name: 'Error', message: 'boom' };
    const calls = [
      ...[null, 'boom', 1, [], {}, { name: 'Error' }, { message: 'boom' }, { name: 1, message: 'boom' }, { name: 'Error', message: null }].map(
        (error) => ({ text: FAIL, values: [owned.jobId, owned.workerId, owned.fence, error === null ? null : JSON.stringify(error), '{}'] }),
      ),
      ...[
        null,
        [],
        'options',
        { bogus: 1 },
        { attemptOutcome: 'crashed' },
        { attemptOutcome: 7 },
        { nonRetryable: 'yes' },
        { retryDelayMs: -1 },
        { retryDelayMs: 604_800_001 },
        { retryDelayMs: 1.5 },
        { retryDelayMs: '10' },
        { retryPolicy: { kind: 'linear' } },
        { retryPolicy: 'fixed' },
      ].map((options) => ({
        text: FAIL,
        values: [owned.jobId, owned.workerId, owned.fence, JSON.stringify(envelope), options === null ? null : JSON.stringify(options)],
      })),
      { text: FAIL, values: [owned.jobId, '', owned.fence, JSON.stringify(envelope), '{}'] },
    ];
    await expectRefusedWithoutWrites(owned, calls);
    expect(await admin.cancel(owned.jobId)).toBe('cancel_requested');
    await pool.query('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3)', [owned.jobId, owned.workerId, owned.fence]);
  });

  it('save_checkpoint_v1 refuses a bad name or an oversized value from the owner, and stores nothing', async () => {
    const owned = await ownedJob('sql-owner-checkpoint');
    await expectRefusedWithoutWrites(owned, [
      { text: CHECKPOINT, values: [owned.jobId, owned.workerId, owned.fence, null, '1'] },
      { text: CHECKPOINT, values: [owned.jobId, owned.workerId, owned.fence, '', '1'] },
      { text: CHECKPOINT, values: [owned.jobId, owned.workerId, owned.fence, 'n'.repeat(201), '1'] },
      { text: CHECKPOINT, values: [owned.jobId, owned.workerId, owned.fence, 'ok', JSON.stringify(MIB)] },
      { text: CHECKPOINT, values: [owned.jobId, '', owned.fence, 'ok', '1'] },
      { text: CHECKPOINT, values: [owned.jobId, null, owned.fence, 'ok', '1'] },
    ]);
    // Names are opaque text to the protocol: SQL in a name is stored as written, and replayed.
    const name = "stage'; DROP TABLE workhorse.job_checkpoint; --";
    const saved = await pool.query<{ status: string }>(`${CHECKPOINT} AS status`, [owned.jobId, owned.workerId, owned.fence, name, '{"v":1}']);
    expect(saved.rows[0].status).toBe('saved');
    const { rows } = await pool.query('SELECT name, value FROM workhorse.read_checkpoints_v1($1)', [owned.jobId]);
    expect(rows).toEqual([{ name, value: { v: 1 } }]);
    expect(await admin.cancel(owned.jobId)).toBe('cancel_requested');
    await pool.query('SELECT workhorse.acknowledge_cancel_v1($1, $2, $3)', [owned.jobId, owned.workerId, owned.fence]);
  });

  it('JSON text that is not JSON never reaches the functions: jsonb input refuses it (22P02, 22P05)', async () => {
    const before = await rowCounts();
    expect(await sqlstate(ENQUEUE, ['[{"type": "a", "payload": '])).toBe('22P02');
    expect(await sqlstate(ENQUEUE, ['[{"type": "a", "payload": "\\u0000"}]'])).toBe('22P05');
    expect(await rowCounts()).toEqual(before);
  });
});
