import type { ErrorEnvelope } from '../types';

/**
 * The most characters of each part of an envelope that are kept (a longer part is cut, and says
 * so). Even escaped as JSON at six bytes a character the envelope stays far below the 1 MiB
 * that `fail_v1` accepts, so a failure is never refused for its size.
 */
export const ENVELOPE_LIMITS = { name: 200, message: 32_768, stack: 32_768 } as const;

/**
 * Turns anything a handler threw into the stored `{ name, message, stack }` envelope: an
 * `Error`'s name, message and stack, or for anything else the name `NonErrorThrown` and the
 * value as JSON (or as text). It never throws, whatever the value does when read (throwing
 * getters, `toJSON` or `toString`, proxies), and the result is always storable: each part is
 * cut to its limit (the cut part ends with `… [truncated: n of m characters kept]`), and NUL
 * characters and unpaired surrogates, which PostgreSQL cannot store, are replaced by U+FFFD.
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
  envelope.name = storable(bounded(envelope.name, ENVELOPE_LIMITS.name));
  envelope.message = storable(bounded(envelope.message, ENVELOPE_LIMITS.message));
  if (envelope.stack !== undefined) envelope.stack = storable(bounded(envelope.stack, ENVELOPE_LIMITS.stack));
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

function bounded(text: string, max: number): string {
  if (text.length <= max) return text;
  // Never cut a surrogate pair in two.
  const cut = text.charCodeAt(max - 1) >= 0xd800 && text.charCodeAt(max - 1) <= 0xdbff ? max - 1 : max;
  return `${text.slice(0, cut)}… [truncated: ${cut} of ${text.length} characters kept]`;
}

// PostgreSQL cannot store NUL characters or unpaired surrogates in jsonb; error text is not
// under our control, so make it storable (U+FFFD in their place) instead of refusing it.
function storable(text: string): string {
  return text.replace(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
}
