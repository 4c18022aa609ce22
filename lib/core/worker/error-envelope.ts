import type { ErrorEnvelope } from '../types';

/**
 * The most characters (Unicode code points) of each part of an envelope that a client sends, the
 * same in every SDK. The stored bound is SQL's (`workhorse.bounded_error`: name 200, message and
 * stack 32,768, a cut part saying so); this cap, far above it, only keeps a request of any error
 * small enough to send. A part longer than the cap reads as "of 1048576 characters" in the
 * stored marker.
 */
export const ERROR_PART_CAP = 1_048_576;

/**
 * Turns anything a handler threw into the `{ name, message, stack }` envelope `fail_v1` stores:
 * an `Error`'s name, message and stack, or for anything else the name `NonErrorThrown` and the
 * value as JSON (or as text). It never throws, whatever the value does when read (throwing
 * getters, `toJSON` or `toString`, proxies), and the result is always sendable: NUL characters
 * and unpaired surrogates, which PostgreSQL cannot store, are replaced by U+FFFD, and each part
 * is capped at `ERROR_PART_CAP` code points. The database bounds the stored parts (see
 * `workhorse.bounded_error`), the same for every SDK.
 *
 * @example
 * toErrorEnvelope(new TypeError('bad input')); // { name: 'TypeError', message: 'bad input', stack: 'TypeError: ...' }
 * toErrorEnvelope({ code: 42 }); // { name: 'NonErrorThrown', message: '{"code":42}' }
 */
export function toErrorEnvelope(thrown: unknown): ErrorEnvelope {
  let envelope: ErrorEnvelope;
  if (isError(thrown)) {
    envelope = { name: textOf(read(thrown, 'name')) || 'Error', message: textOf(read(thrown, 'message')) };
    const stack = read(thrown, 'stack');
    if (typeof stack === 'string') envelope.stack = stack;
  } else {
    envelope = { name: 'NonErrorThrown', message: typeof thrown === 'string' ? thrown : describe(thrown) };
  }
  envelope.name = sendable(envelope.name);
  envelope.message = sendable(envelope.message);
  if (envelope.stack !== undefined) envelope.stack = sendable(envelope.stack);
  return envelope;
}

/** What a thrown error may say about its retry (`fail_v1`'s options). */
export interface RetryControl {
  /** `retryable: false` on the error: fail the job now, whatever attempts remain. */
  nonRetryable?: boolean;
  /** A valid `retryDelayMs` on the error: the delay before the next attempt. */
  retryDelayMs?: number;
}

/**
 * Reads `retryable` and `retryDelayMs` from a thrown error (see `NonRetryableError`,
 * `RetryAfterError`); a property that cannot be read counts as absent.
 */
export function retryControlOf(thrown: unknown): RetryControl {
  const control: RetryControl = {};
  if (typeof thrown === 'object' && thrown !== null) {
    if (read(thrown, 'retryable') === false) control.nonRetryable = true;
    const ms = read(thrown, 'retryDelayMs');
    if (typeof ms === 'number' && Number.isInteger(ms) && ms >= 0 && ms <= 604_800_000) control.retryDelayMs = ms;
  }
  return control;
}

// Reading anything of a thrown value may throw (a getter, a proxy's trap): such a read counts as
// absent, so that the failure is still recorded.

function isError(value: unknown): value is object {
  try {
    return value instanceof Error;
  } catch {
    return false;
  }
}

function read(value: object, key: string): unknown {
  try {
    return (value as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  try {
    return String(value);
  } catch {
    return '';
  }
}

function describe(value: unknown): string {
  try {
    const json = JSON.stringify(value);
    if (json !== undefined) return json;
  } catch {
    // not JSON (a cycle, a BigInt, a throwing toJSON): as text instead
  }
  try {
    return String(value);
  } catch {
    // no usable toString either
  }
  try {
    return Object.prototype.toString.call(value);
  } catch {
    return `a value of type ${typeof value} that could not be read`;
  }
}

// PostgreSQL cannot store NUL characters or unpaired surrogates in jsonb; error text is not
// under our control, so make it storable (U+FFFD in their place) instead of refusing it, and cap
// it at ERROR_PART_CAP code points (a surrogate pair is one).
function sendable(text: string): string {
  const clean = text.replace(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
  if (clean.length <= ERROR_PART_CAP) return clean;
  let units = 0;
  for (let points = 0; points < ERROR_PART_CAP && units < clean.length; points++) {
    const code = clean.charCodeAt(units);
    units += code >= 0xd800 && code <= 0xdbff ? 2 : 1;
  }
  return clean.slice(0, units);
}
