import { WorkhorseValidationError } from './errors';
import type { DependencyPolicy, EnqueueOptions, RetryPolicy } from './types';

/** Limits shared with the SQL functions (which check them again). */
export const LIMITS = {
  nameLength: 128,
  priority: { min: 0, max: 100 },
  maxAttempts: { min: 1, max: 100 },
  batchSize: 1000,
  /** The JSON text of a whole `enqueueMany` batch, payloads and options together (16 MiB). */
  batchBytes: 16 * 1024 * 1024,
  jsonBytes: 1024 * 1024,
  jsonDepth: 100,
  tags: 20,
  tagLength: 64,
  delayMs: 604_800_000,
  /** Prerequisites of one job (`dependsOn`). */
  dependencies: 1000,
} as const;

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
]);

/** What `enqueue_many_v1` receives for one job (besides its payload, written as JSON text). */
interface WireEnqueueOptions {
  type: string;
  queue?: string;
  priority?: number;
  runAt?: string;
  maxAttempts?: number;
  retryPolicy?: RetryPolicy;
  tags?: string[];
  deadline?: string;
  executionTimeoutMs?: number;
  idempotencyKey?: string;
  idempotencyScope?: string;
  idempotencyTtlMs?: number;
  dependsOn?: (string | number)[];
  onDependencyFailed?: DependencyPolicy;
  onDependencyCanceled?: DependencyPolicy;
}

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

export function checkRetryPolicy(value: unknown, field: string): RetryPolicy {
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
    if (policy[key] !== undefined) checkInteger(policy[key], `${field}.${key}`, 0, LIMITS.delayMs);
  };
  if (policy.kind === 'fixed') {
    delay('delayMs');
  } else {
    delay('initialMs');
    delay('maxMs');
    const m = policy.multiplier;
    if (m !== undefined && (typeof m !== 'number' || !Number.isFinite(m) || m < 1 || m > 10)) {
      fail(`${field}.multiplier`, 'must be a number from 1 to 10');
    }
    if (policy.jitter !== undefined && typeof policy.jitter !== 'boolean') fail(`${field}.jitter`, 'must be true or false');
    const initial = (policy.initialMs as number | undefined) ?? 1000;
    const max = (policy.maxMs as number | undefined) ?? 3_600_000;
    if (max < initial) fail(`${field}.maxMs`, 'must not be smaller than initialMs');
  }
  return { ...(policy as RetryPolicy) };
}

/**
 * Validates one enqueue call and returns the JSON text of the request `enqueue_many_v1` receives.
 * `path` prefixes field names for batch members (`requests[3].`), `batchIndex` is a batch
 * member's index (its `dependsOn` may name earlier members by index). The payload is turned into
 * JSON once, here, and its text goes into the request as it is.
 */
export function toRequestJson(type: unknown, payload: unknown, options: unknown, path = '', batchIndex = 0): string {
  const wire: WireEnqueueOptions = { type: checkName(type, `${path}type`) };
  const payloadText = toJsonText(payload, `${path}payload`);
  checkEnqueueOptions(wire, options, path, batchIndex);
  return `{"payload":${payloadText},${JSON.stringify(wire).slice(1)}`;
}

/**
 * `dependsOn` and its policies. `batchIndex`: the request's index in its batch (an entry may be
 * the index of an earlier request); undefined for a single enqueue.
 */
function checkDependencies(opts: Record<string, unknown>, wire: WireEnqueueOptions, path: string, batchIndex: number): void {
  for (const key of ['onDependencyFailed', 'onDependencyCanceled'] as const) {
    const policy = opts[key];
    if (policy === undefined) continue;
    if (opts.dependsOn === undefined) fail(`${path}${key}`, 'needs dependsOn');
    if (policy !== 'fail' && policy !== 'cancel' && policy !== 'run') fail(`${path}${key}`, 'must be "fail", "cancel" or "run"');
    wire[key] = policy;
  }
  if (opts.dependsOn === undefined) return;
  const list: unknown = opts.dependsOn;
  if (!Array.isArray(list) || list.length < 1 || list.length > LIMITS.dependencies) {
    fail(`${path}dependsOn`, `must be an array of 1 to ${LIMITS.dependencies} job ids`);
  }
  const seen = new Set<string>();
  wire.dependsOn = list.map((entry: unknown, i) => {
    const field = `${path}dependsOn[${i}]`;
    if (typeof entry === 'number') {
      if (!Number.isInteger(entry) || entry < 0 || entry >= batchIndex) {
        fail(field, batchIndex > 0 ? `must name a job id, or the index of an earlier request of the batch (0 to ${batchIndex - 1})` : 'must be a job id (a UUID string)');
      }
    } else {
      checkJobId(entry, field);
    }
    const key = String(entry).toLowerCase();
    if (seen.has(key)) fail(field, 'names a job that dependsOn already names');
    seen.add(key);
    return entry as string | number;
  });
}

function checkEnqueueOptions(wire: WireEnqueueOptions, options: unknown, path: string, batchIndex: number): void {
  if (options === undefined || options === null) return;
  if (typeof options !== 'object' || Array.isArray(options)) fail(`${path}options`, 'must be an object');
  const o = options as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!ENQUEUE_OPTION_KEYS.has(key)) {
      fail(`${path}${key}`, `is not an enqueue option (${[...ENQUEUE_OPTION_KEYS].join(', ')})`);
    }
  }
  const opts = o as EnqueueOptions;
  if (opts.queue !== undefined) wire.queue = checkName(opts.queue, `${path}queue`);
  if (opts.priority !== undefined) {
    wire.priority = checkInteger(opts.priority, `${path}priority`, LIMITS.priority.min, LIMITS.priority.max);
  }
  if (opts.maxAttempts !== undefined) {
    wire.maxAttempts = checkInteger(opts.maxAttempts, `${path}maxAttempts`, LIMITS.maxAttempts.min, LIMITS.maxAttempts.max);
  }
  if (opts.runAt !== undefined) wire.runAt = checkTimestamp(opts.runAt, `${path}runAt`);
  if (opts.deadline !== undefined) wire.deadline = checkTimestamp(opts.deadline, `${path}deadline`);
  if (opts.idempotencyKey !== undefined) {
    const key: unknown = opts.idempotencyKey;
    if (typeof key !== 'string' || key.length === 0 || [...key].length > 512) {
      fail(`${path}idempotencyKey`, 'must be a string of 1 to 512 characters');
    }
    checkString(key, `${path}idempotencyKey`);
    wire.idempotencyKey = key;
  }
  for (const key of ['idempotencyScope', 'idempotencyTtlMs'] as const) {
    if (opts[key] !== undefined && opts.idempotencyKey === undefined) fail(`${path}${key}`, 'needs an idempotencyKey');
  }
  if (opts.idempotencyScope !== undefined) wire.idempotencyScope = checkName(opts.idempotencyScope, `${path}idempotencyScope`);
  if (opts.idempotencyTtlMs !== undefined) {
    wire.idempotencyTtlMs = checkInteger(opts.idempotencyTtlMs, `${path}idempotencyTtlMs`, 1000, 2_592_000_000);
  }
  if (opts.executionTimeoutMs !== undefined) {
    wire.executionTimeoutMs = checkInteger(opts.executionTimeoutMs, `${path}executionTimeoutMs`, 1000, 86_400_000);
  }
  if (opts.retryPolicy !== undefined) wire.retryPolicy = checkRetryPolicy(opts.retryPolicy, `${path}retryPolicy`);
  if (opts.tags !== undefined) {
    const tags: unknown = opts.tags;
    if (!Array.isArray(tags) || tags.length > LIMITS.tags) fail(`${path}tags`, `must be an array of at most ${LIMITS.tags} strings`);
    tags.forEach((tag: unknown, i) => {
      // Counted in characters (code points), as PostgreSQL's length() counts them.
      if (typeof tag !== 'string' || tag.length < 1 || [...tag].length > LIMITS.tagLength) {
        fail(`${path}tags[${i}]`, `must be a string of 1 to ${LIMITS.tagLength} characters`);
      }
      checkString(tag, `${path}tags[${i}]`);
    });
    wire.tags = [...(tags as string[])];
  }
  checkDependencies(o, wire, path, batchIndex);
}

/**
 * A Date within the range every date the protocol stores or compares may take: the years 1970
 * to 9999 (UTC). The same range for `runAt`, `deadline`, `ctx.sleepUntil` and the dead-letter
 * filters, so no date is accepted in one place and refused in another.
 */
export function checkDate(value: unknown, field: string): Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) fail(field, 'must be a valid Date');
  const year = value.getUTCFullYear();
  if (year < 1970 || year > 9999) fail(field, 'must be a date between the years 1970 and 9999');
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
