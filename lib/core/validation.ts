import { WorkhorseValidationError } from './errors';
import { PROTOCOL_LIMITS } from './limits';
import type { RetryPolicy } from './types';

/**
 * Limits of the protocol (from `sdk/protocol/limits.json`, see `PROTOCOL_LIMITS`), in the shape
 * this library has always exported. The SQL functions enforce them; the client uses them to
 * document its options and to bound what it builds in memory (a batch's JSON text).
 */
export const LIMITS = Object.freeze({
  nameLength: PROTOCOL_LIMITS.enqueue.nameLength.max,
  priority: PROTOCOL_LIMITS.enqueue.priority,
  maxAttempts: PROTOCOL_LIMITS.enqueue.maxAttempts,
  batchSize: PROTOCOL_LIMITS.enqueue.batchSize.max,
  /** The JSON text of a whole `enqueueMany` batch, payloads and options together (16 MiB). */
  batchBytes: PROTOCOL_LIMITS.enqueue.batchBytes.max,
  jsonBytes: PROTOCOL_LIMITS.enqueue.jsonBytes.max,
  jsonDepth: PROTOCOL_LIMITS.enqueue.jsonDepth.max,
  tags: PROTOCOL_LIMITS.enqueue.tags.max,
  tagLength: PROTOCOL_LIMITS.enqueue.tagLength.max,
  delayMs: PROTOCOL_LIMITS.retryPolicy.delayMs.max,
  /** Prerequisites of one job (`dependsOn`). */
  dependencies: PROTOCOL_LIMITS.enqueue.dependencies.max,
});

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:/-]*$/;
const ENQUEUE_OPTION_KEYS = new Set([
  'queue',
  'priority',
  'runAt',
  'maxAttempts',
  'retryPolicy',
  'tags',
  'deadline',
  'executionTimeoutMs',
  'idempotencyKey',
  'idempotencyScope',
  'idempotencyTtlMs',
  'dependsOn',
  'onDependencyFailed',
  'onDependencyCanceled',
  'dedupe',
  'concurrencyKey',
]);

function fail(field: string, message: string): never {
  throw new WorkhorseValidationError(field, message);
}

export function checkName(value: unknown, field: string): string {
  if (typeof value !== 'string') fail(field, 'must be a string');
  if (value.length === 0 || value.length > LIMITS.nameLength || !NAME.test(value)) {
    fail(field, 'must be 1 to 128 characters: a letter or digit, then letters, digits or . _ : / -');
  }
  return value;
}

export function checkInteger(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(field, `must be an integer from ${min} to ${max}`);
  }
  return value;
}

/**
 * A whole number a protocol function takes as an integer parameter; its range is the function's
 * to check (the message names it, from limits.json, as the function's does).
 */
export function checkWholeNumber(value: unknown, field: string, range: { min: number; max: number }): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) fail(field, `must be an integer from ${range.min} to ${range.max} (one year)`);
  return value;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return (Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null)?.constructor?.name ?? 'object';
  return typeof value;
}

// A string PostgreSQL can store (in jsonb, or in a text column: `where`) as it is: no NUL
// character and no unpaired UTF-16 surrogate.
function checkString(value: string, field: string, where = ' in JSON'): void {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0) fail(field, `contains the character \\u0000, which PostgreSQL cannot store${where}`);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      fail(field, 'contains an unpaired UTF-16 surrogate, which is not valid Unicode text');
    }
    if (c >= 0xdc00 && c <= 0xdfff) fail(field, 'contains an unpaired UTF-16 surrogate, which is not valid Unicode text');
  }
}

function checkJsonNode(value: unknown, field: string, depth: number, ancestors: Set<object>): void {
  if (typeof value === 'string') return checkString(value, field);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) fail(field, `${value} is not a JSON number (NaN and Infinity cannot be stored)`);
    return;
  }
  if (typeof value === 'boolean' || value === null) return;
  if (value === undefined) fail(field, 'is undefined, which is not JSON (use null)');
  if (typeof value === 'bigint') fail(field, 'is a BigInt, which is not JSON (convert it to a string or a number)');
  if (typeof value !== 'object') fail(field, `is a ${typeof value}, which is not JSON`);
  const object = value as object;
  if (depth >= LIMITS.jsonDepth) fail(field, `nests deeper than ${LIMITS.jsonDepth} levels`);
  if (ancestors.has(object)) fail(field, 'refers back to itself (a cycle), which is not JSON');
  ancestors.add(object);
  if (Array.isArray(object)) {
    for (let i = 0; i < object.length; i++) {
      if (!(i in object)) fail(`${field}[${i}]`, 'is a hole in a sparse array, which is not JSON');
      checkJsonNode(object[i], `${field}[${i}]`, depth + 1, ancestors);
    }
  } else {
    const proto = Object.getPrototypeOf(object) as object | null;
    if (proto !== Object.prototype && proto !== null) {
      const hint = object instanceof Date ? ' (pass date.toISOString())' : '';
      fail(field, `is a ${describe(object)}, not a plain object, array or JSON primitive${hint}`);
    }
    if (Object.getOwnPropertySymbols(object).length > 0) fail(field, 'has symbol keys, which are not JSON');
    for (const key of Object.keys(object)) {
      checkString(key, `${field} key ${JSON.stringify(key)}`);
      const child = (object as Record<string, unknown>)[key];
      // JSON.stringify drops undefined properties; an absent key reads back the same way.
      if (child !== undefined) checkJsonNode(child, `${field}.${key}`, depth + 1, ancestors);
    }
  }
  ancestors.delete(object);
}

/**
 * Checks that a value is JSON that PostgreSQL stores and gives back unchanged, and at most
 * 1 MiB as text; returns that text.
 */
export function toJsonText(value: unknown, field: string): string {
  checkJsonNode(value, field, 0, new Set());
  const text = JSON.stringify(value);
  if (Buffer.byteLength(text, 'utf8') > LIMITS.jsonBytes) {
    fail(field, `is larger than the 1 MiB limit (${LIMITS.jsonBytes} bytes of JSON)`);
  }
  return text;
}

/**
 * A handler's retry policy, or a job definition's default, checked when it is given (no database
 * at hand) against limits.json; an enqueue's policy is checked by the SQL function alone.
 */
export function checkRetryPolicy(value: unknown, field: string): RetryPolicy {
  const retry = PROTOCOL_LIMITS.retryPolicy;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    fail(field, 'must be an object such as { kind: "exponential" } or { kind: "fixed", delayMs: 5000 }');
  }
  const policy = value as Record<string, unknown>;
  const allowed =
    policy.kind === 'fixed'
      ? ['kind', 'delayMs']
      : policy.kind === 'exponential'
        ? ['kind', 'initialMs', 'multiplier', 'maxMs', 'jitter']
        : fail(`${field}.kind`, 'must be "exponential" or "fixed"');
  for (const key of Object.keys(policy)) {
    if (!allowed.includes(key)) fail(`${field}.${key}`, `is not an option of a ${policy.kind} retry policy (${allowed.join(', ')})`);
  }
  const delay = (key: string) => {
    if (policy[key] !== undefined) checkInteger(policy[key], `${field}.${key}`, retry.delayMs.min, retry.delayMs.max);
  };
  if (policy.kind === 'fixed') {
    delay('delayMs');
  } else {
    delay('initialMs');
    delay('maxMs');
    const m = policy.multiplier;
    if (m !== undefined && (typeof m !== 'number' || !Number.isFinite(m) || m < retry.multiplier.min || m > retry.multiplier.max)) {
      fail(`${field}.multiplier`, `must be a number from ${retry.multiplier.min} to ${retry.multiplier.max}`);
    }
    if (policy.jitter !== undefined && typeof policy.jitter !== 'boolean') fail(`${field}.jitter`, 'must be true or false');
    const initial = (policy.initialMs as number | undefined) ?? retry.default.initialMs;
    const max = (policy.maxMs as number | undefined) ?? retry.default.maxMs;
    if (max < initial) fail(`${field}.maxMs`, 'must not be smaller than initialMs');
  }
  return { ...(policy as RetryPolicy) };
}

/**
 * One enqueue call as the JSON text of the request `enqueue_many_v1` receives. `path` prefixes
 * field names for batch members (`requests[3].`). The client checks only what JSON cannot carry
 * (Dates become ISO text; undefined, BigInt, NaN, cycles, NUL and lone surrogates are refused) and
 * which option keys its API has; every range, name and rule is the SQL function's (P1001 naming
 * the field, before anything is written). The payload is turned into JSON once, here.
 */
export function toRequestJson(type: unknown, payload: unknown, options: unknown, path = ''): string {
  if (typeof type === 'string') checkString(type, `${path}type`);
  checkJsonNode(payload, `${path}payload`, 0, new Set());
  const payloadText = JSON.stringify(payload);
  const wire: Record<string, unknown> = { type };
  if (options !== undefined && options !== null) {
    if (typeof options !== 'object' || Array.isArray(options)) fail(`${path}options`, 'must be an object');
    for (const [key, value] of Object.entries(options)) {
      if (!ENQUEUE_OPTION_KEYS.has(key)) fail(`${path}${key}`, `is not an enqueue option (${[...ENQUEUE_OPTION_KEYS].join(', ')})`);
      if (value === undefined) continue;
      // (The options' types have no null; SQL would read some nulls as "none".)
      if (value === null) fail(`${path}${key}`, 'must not be null (leave the option out for its default)');
      const given = key === 'runAt' || key === 'deadline' ? checkTimestamp(value, `${path}${key}`) : value;
      checkJsonNode(given, `${path}${key}`, 0, new Set());
      wire[key] = given;
    }
  }
  const rest = JSON.stringify(wire);
  return rest === '{}' ? `{"payload":${payloadText}}` : `{"payload":${payloadText},${rest.slice(1)}`;
}

/**
 * A validation error of `enqueue_many_v1` (which names a request's fields `requests[i].`) under
 * the names the caller gave: `priority` for a single enqueue, `children[i].priority` for a child.
 */
export function renamedRequestError(error: unknown, prefix: (index: string) => string): unknown {
  // (Only the plain kind: the typed kinds built on it carry more than a field and a message.)
  if (!(error instanceof WorkhorseValidationError) || error.constructor !== WorkhorseValidationError) return error;
  const match = /^requests\[(\d+)\]\.?/.exec(error.field);
  if (match === null) return error;
  const head = prefix(match[1]);
  const rest = error.field.slice(match[0].length);
  const field = head === '' ? rest || 'request' : rest === '' ? head : `${head}.${rest}`;
  const detail = error.message.startsWith(`${error.field}: `) ? error.message.slice(error.field.length + 2) : error.message;
  return new WorkhorseValidationError(field, detail);
}

/**
 * A job definition's defaults, checked when it is defined (`defineJob` has no database at hand),
 * against the ranges of `limits.json`; an enqueue checks them again in SQL.
 */
export function checkJobDefaults(defaults: Record<string, unknown>): void {
  toRequestJson('definition', null, defaults);
  const limits = PROTOCOL_LIMITS.enqueue;
  if (defaults.queue !== undefined) checkName(defaults.queue, 'queue');
  for (const key of ['priority', 'maxAttempts', 'executionTimeoutMs'] as const) {
    if (defaults[key] !== undefined) checkInteger(defaults[key], key, limits[key].min, limits[key].max);
  }
  if (defaults.retryPolicy !== undefined) checkRetryPolicy(defaults.retryPolicy, 'retryPolicy');
  const tags = defaults.tags;
  if (tags !== undefined) {
    if (!Array.isArray(tags) || tags.length > limits.tags.max) fail('tags', `must be an array of at most ${limits.tags.max} strings`);
    tags.forEach((tag: unknown, i) => checkText(tag, `tags[${i}]`, limits.tagLength.min, limits.tagLength.max));
  }
}

/**
 * A Date within the range every date the protocol stores or compares may take: the years 1970
 * to 9999 (UTC). The same range for `runAt`, `deadline`, `ctx.sleepUntil` and the dead-letter
 * filters, so no date is accepted in one place and refused in another.
 */
export function checkDate(value: unknown, field: string): Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) fail(field, 'must be a valid Date');
  // (PostgreSQL cannot even read the ISO text of a year past 9999, so this range stays here,
  // from limits.json; the SQL functions check it again.)
  const { minYear, maxYear } = PROTOCOL_LIMITS.dates;
  const year = value.getUTCFullYear();
  if (year < minYear || year > maxYear) fail(field, `must be a time between the years ${minYear} and ${maxYear}`);
  return value;
}

function checkTimestamp(value: unknown, field: string): string {
  return checkDate(value, field).toISOString();
}

/**
 * Free text a caller gives (a reason, an actor, a request id, a name): a string of `min` to `max`
 * characters that PostgreSQL can store as given, so bad text is a typed error naming the field
 * instead of a database error (a NUL) or a silent change (an unpaired surrogate).
 */
export function checkText(value: unknown, field: string, min: number, max: number): string {
  // Counted in code points, as PostgreSQL counts them (only a string longer than max in UTF-16 units
  // can be too long in code points).
  if (typeof value !== 'string' || value.length < min || (value.length > max && [...value].length > max)) {
    fail(field, min > 0 ? `must be a string of ${min} to ${max} characters` : `must be a string of at most ${max} characters`);
  }
  checkString(value, field, '');
  return value;
}

/**
 * A string for a text parameter of a protocol function (a name, an actor, a reason, a request
 * id): only what PostgreSQL cannot store as given is refused here (not a string, a NUL, an
 * unpaired surrogate); its length and form are the function's to check (P1001 naming the field).
 */
export function checkParamText(value: unknown, field: string): string {
  if (typeof value !== 'string') fail(field, 'must be a string');
  checkString(value, field, '');
  return value;
}

/**
 * A number for an integer parameter of a protocol function (a limit, a budget): a whole number
 * that fits the parameter's 32 bits; its range is the function's to check.
 */
export function checkParamInteger(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) fail(field, 'must be an integer');
  if (Math.abs(value) > 2_147_483_647) fail(field, 'must be an integer (this one is beyond a 32-bit integer)');
  return value;
}

/**
 * An options or filter object: `undefined` is none; anything but an object (null, an array, a
 * string), or a key not in `keys`, is refused naming the field or the key. `what` names the kind
 * of option in the message (`a listJobs filter`).
 */
export function checkOptions<T extends object>(value: T | undefined, field: string, keys: readonly string[], what: string): Partial<T> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(field, 'must be an object');
  for (const key of Object.keys(value)) {
    if (!keys.includes(key)) fail(key, `is not ${what} (${keys.join(', ')})`);
  }
  return value;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function checkJobId(value: unknown, field = 'jobId'): string {
  if (typeof value !== 'string' || !UUID.test(value)) fail(field, 'must be a job id (a UUID string)');
  return value;
}
