import { JobDataRejectedError, WorkhorseValidationError } from './errors';
import type { StandardSchemaV1 } from './standard-schema';
import type { EnqueueOptions, EnqueueRequest } from './types';
import { checkJobDefaults, checkName } from './validation';

/** Enqueue options that a definition can give every job of its type (a call's own options win). */
export type JobDefaults = Pick<EnqueueOptions, 'queue' | 'priority' | 'maxAttempts' | 'retryPolicy' | 'tags' | 'executionTimeoutMs'>;

const DEFAULT_KEYS: readonly (keyof JobDefaults)[] = ['queue', 'priority', 'maxAttempts', 'retryPolicy', 'tags', 'executionTimeoutMs'];

/** The second argument of {@link defineJob}. */
export interface JobDefinitionOptions<P, R, I> extends JobDefaults {
  /**
   * Validates each payload at enqueue, before anything is written: any Standard Schema (zod,
   * valibot, arktype, ...). What it gives back is what is stored and what the handler receives.
   */
  payload?: StandardSchemaV1<I, P>;
  /**
   * Validates the handler's result before it is recorded. A refused result fails the job at once
   * (no retry: the same handler would return it again), with the validator's issues in its error.
   */
  result?: StandardSchemaV1<unknown, R>;
}

/**
 * A job type with its payload type `P`, result type `R` (and, when a validator transforms the
 * payload, the type `I` that callers give). Made by {@link defineJob}; used by `queue.enqueue`,
 * `worker.handle`, `@JobHandler` and `admin.getJob` so that a wrong payload or result does not
 * compile.
 */
export interface JobDefinition<P = unknown, R = unknown, I = P> {
  readonly type: string;
  /** Enqueue options of every job of this type, under the call's own. */
  readonly defaults: Readonly<JobDefaults>;
  readonly payloadSchema: StandardSchemaV1<I, P> | undefined;
  readonly resultSchema: StandardSchemaV1<unknown, R> | undefined;
  /** Never set: carries the types, so that definitions of different types are not interchangeable. */
  readonly '~types'?: { readonly payload: P; readonly result: R; readonly input: I };
}

/**
 * One job of a batch given to `enqueueMany` by its definition: `{ job: definition, payload,
 * ...options }`. The payload is of the definition's (input) type and passes its validator, and
 * the definition's defaults apply under the request's own options, as for `enqueue(definition)`.
 */
export type DefinedEnqueueRequest<P = unknown, R = unknown, I = P> = Omit<EnqueueRequest, 'type' | 'payload'> & {
  job: JobDefinition<P, R, I>;
  payload: I;
  /** The definition gives the type. */
  type?: never;
};

/**
 * What `enqueueMany` takes: requests by type (`EnqueueRequest`) and by definition
 * (`DefinedEnqueueRequest`) mixed, each definition's payload checked against that definition,
 * so a wrong payload in any of them does not compile.
 */
export type EnqueueManyRequests<T extends readonly unknown[]> = T & {
  readonly [K in keyof T]: T[K] extends { job: JobDefinition<infer P, infer R, infer I> } ? DefinedEnqueueRequest<P, R, I> : EnqueueRequest;
};

function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  const props = (value as { '~standard'?: { version?: unknown; validate?: unknown } } | null)?.['~standard'];
  return typeof props === 'object' && props !== null && props.version === 1 && typeof props.validate === 'function';
}

/**
 * Defines a job type once, with its payload and result types, default enqueue options and
 * optional validators, for typed enqueues, handlers and reads. Checked now: a bad type, option
 * or validator raises {@link WorkhorseValidationError} naming it.
 *
 * @example
 * const fulfillOrder = defineJob<{ orderId: string }, { labelId: string }>('order.fulfill', { queue: 'orders' });
 * await queue.enqueue(fulfillOrder, { orderId: '42' });
 * worker.handle(fulfillOrder, async (payload) => ({ labelId: await printLabel(payload.orderId) }));
 *
 * // With a validator (zod here), the types come from the schema:
 * const sendEmail = defineJob('email.send', { payload: z.object({ to: z.email() }) });
 */
export function defineJob<P = unknown, R = unknown, I = P>(type: string, options: JobDefinitionOptions<P, R, I> = {}): JobDefinition<P, R, I> {
  checkName(type, 'type');
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new WorkhorseValidationError('options', 'must be an object');
  }
  const { payload, result, ...defaults } = options;
  for (const key of Object.keys(defaults)) {
    if (!(DEFAULT_KEYS as readonly string[]).includes(key)) {
      throw new WorkhorseValidationError(key, `is not an option of a job definition (${[...DEFAULT_KEYS, 'payload', 'result'].join(', ')})`);
    }
  }
  checkJobDefaults(defaults);
  for (const [field, schema] of [['payload', payload], ['result', result]] as const) {
    if (schema !== undefined && !isStandardSchema(schema)) {
      throw new WorkhorseValidationError(field, 'must be a Standard Schema validator (zod, valibot, arktype, ...): an object with ~standard.validate');
    }
  }
  return Object.freeze({ type, defaults: Object.freeze({ ...defaults }), payloadSchema: payload, resultSchema: result });
}

async function validated<T>(schema: StandardSchemaV1<unknown, T>, value: unknown, field: ConstructorParameters<typeof JobDataRejectedError>[0], type: string): Promise<T> {
  const outcome = await schema['~standard'].validate(value);
  if (outcome.issues !== undefined) throw new JobDataRejectedError(field, type, outcome.issues);
  return outcome.value;
}

/**
 * One enqueue of a defined job: its payload as validated, and the definition's defaults under
 * the call's options. `path` is the request's in a batch (`requests[2].`), for the error's field.
 */
export async function definedRequest<O extends object = EnqueueOptions>(
  definition: JobDefinition<unknown, unknown, unknown>,
  input: unknown,
  options: O | undefined,
  path: '' | `requests[${number}].` = '',
): Promise<{ payload: unknown; options: O | undefined }> {
  const schema = definition.payloadSchema;
  const payload = schema ? await validated(schema, input, `${path}payload`, definition.type) : input;
  // Anything but a plain object goes on unchanged, so the usual validation names it.
  const merged = (options === undefined ? { ...definition.defaults } : isPlainObject(options) ? { ...definition.defaults, ...options } : options) as O;
  return { payload, options: merged };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The handler a worker registers for a definition: with a result validator, results are checked before they are recorded. */
export function definedHandler<F extends (payload: never, ctx: never) => unknown>(definition: JobDefinition<unknown, unknown, unknown>, fn: F): F {
  const schema = definition.resultSchema;
  if (schema === undefined) return fn;
  const checked = async (payload: never, ctx: never): Promise<unknown> => validated(schema, await fn(payload, ctx), 'result', definition.type);
  return checked as unknown as F;
}

/** True when `value` is a job definition rather than a type name. */
export function isJobDefinition(value: unknown): value is JobDefinition<unknown, unknown, unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string' && 'defaults' in value;
}
