import { WorkhorseValidationError } from '../errors';
import { checkParamText, toRequestJson } from '../validation';
import type { ScheduleDefinition } from './types';

const DEFINITION_KEYS = [
  'key',
  'type',
  'cron',
  'timezone',
  'payload',
  'options',
  'catchUp',
  'catchUpLimit',
  'overlap',
  'missedAfterMs',
] as const;
const JOB_OPTION_KEYS = ['queue', 'priority', 'maxAttempts', 'retryPolicy', 'tags', 'executionTimeoutMs'];

/** What sync_schedules_v1 receives for one schedule. */
export interface WireScheduleDefinition {
  key: string;
  type: string;
  cron: string;
  timezone?: string;
  payload?: unknown;
  options?: Record<string, unknown>;
  catchUp?: string;
  catchUpLimit?: number;
  overlap?: string;
  missedAfterMs?: number;
}

function fail(field: string, message: string): never {
  throw new WorkhorseValidationError(field, message);
}

/**
 * One schedule definition as the SQL function receives it: its fields and its job options are
 * this API's (a key not among them is refused), its payload and options are JSON (converted as an
 * enqueue's). Everything else (names, cron, zone, catch-up, overlap, ranges) is checked by
 * sync_schedules_v1, before anything is written. Field names are prefixed with `path`
 * (`definitions[2].`).
 */
export function toWireSchedule(definition: unknown, path = ''): WireScheduleDefinition {
  if (typeof definition !== 'object' || definition === null || Array.isArray(definition)) {
    fail(path.replace(/\.$/, '') || 'definition', 'must be an object with at least key, type and cron');
  }
  const d = definition as Record<string, unknown>;
  for (const name of Object.keys(d)) {
    if (!(DEFINITION_KEYS as readonly string[]).includes(name)) {
      fail(`${path}${name}`, `is not a schedule field (${DEFINITION_KEYS.join(', ')})`);
    }
  }
  const def = d as Partial<ScheduleDefinition>;
  // Names, the cron expression, the zone, the enumerations and the ranges are sync_schedules_v1's
  // to check (P1001 naming definitions[i].<field>); here only what JSON cannot carry.
  const wire = { key: def.key, type: def.type, cron: def.cron } as WireScheduleDefinition;
  if (def.timezone !== undefined) wire.timezone = def.timezone;
  if (def.options !== undefined && (typeof def.options !== 'object' || def.options === null || Array.isArray(def.options))) {
    fail(`${path}options`, 'must be an object of enqueue options');
  }
  for (const name of Object.keys(def.options ?? {})) {
    if (!JOB_OPTION_KEYS.includes(name)) fail(`${path}options.${name}`, `is not an option of a scheduled job (${JOB_OPTION_KEYS.join(', ')})`);
  }
  // Converted as an enqueue is; the request's JSON, read back, is what the job will hold.
  const request = JSON.parse(toRequestJson(def.type, def.payload ?? {}, def.options, `${path}`)) as Record<string, unknown>;
  if (def.payload !== undefined) wire.payload = request.payload;
  const { type: _type, payload: _payload, ...options } = request;
  if (def.options !== undefined) wire.options = options;
  for (const name of ['key', 'cron', 'timezone', 'catchUp', 'overlap'] as const) {
    if (typeof def[name] === 'string') checkParamText(def[name], `${path}${name}`);
  }
  if (def.catchUp !== undefined) wire.catchUp = def.catchUp;
  if (def.catchUpLimit !== undefined) wire.catchUpLimit = def.catchUpLimit;
  if (def.overlap !== undefined) wire.overlap = def.overlap;
  if (def.missedAfterMs !== undefined) wire.missedAfterMs = def.missedAfterMs;
  return wire;
}

/**
 * A whole namespace's definitions as SQL receives them; how many, and that keys are unique, is
 * sync_schedules_v1's to check.
 */
export function toWireSchedules(namespace: unknown, definitions: unknown): WireScheduleDefinition[] {
  checkParamText(namespace, 'namespace');
  if (!Array.isArray(definitions)) fail('definitions', 'must be an array of schedule definitions');
  return definitions.map((definition: unknown, i) => toWireSchedule(definition, `definitions[${i}].`));
}
