import { WorkhorseValidationError } from '../errors';
import { checkInteger, checkName, LIMITS, toRequestJson } from '../validation';
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
 * Checks one schedule definition before anything is written, and returns what the SQL function
 * receives. Field names are prefixed with `path` (`definitions[2].`). The cron expression and
 * the zone are read by the server (sync_schedules_v1), which also checks the rest again.
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
  const key = checkName(def.key, `${path}key`);
  const type = checkName(def.type, `${path}type`);
  if (typeof def.cron !== 'string' || def.cron.length === 0 || def.cron.length > 200) {
    fail(`${path}cron`, 'must be a cron expression of 1 to 200 characters');
  }
  if (def.timezone !== undefined && (typeof def.timezone !== 'string' || def.timezone.length === 0 || def.timezone.length > 64)) {
    fail(`${path}timezone`, 'must be an IANA time zone name such as Europe/Berlin');
  }
  const wire: WireScheduleDefinition = { key, type, cron: def.cron };
  if (def.timezone !== undefined) wire.timezone = def.timezone;
  if (def.options !== undefined && (typeof def.options !== 'object' || def.options === null || Array.isArray(def.options))) {
    fail(`${path}options`, 'must be an object of enqueue options');
  }
  for (const name of Object.keys(def.options ?? {})) {
    if (!JOB_OPTION_KEYS.includes(name)) fail(`${path}options.${name}`, `is not an option of a scheduled job (${JOB_OPTION_KEYS.join(', ')})`);
  }
  // Checked as an enqueue is; the request's JSON, read back, is what the job will hold.
  const request = JSON.parse(toRequestJson(type, def.payload ?? {}, def.options, `${path}`)) as Record<string, unknown>;
  if (def.payload !== undefined) wire.payload = request.payload;
  const { type: _type, payload: _payload, ...options } = request;
  if (def.options !== undefined) wire.options = options;
  if (def.catchUp !== undefined) {
    if (def.catchUp !== 'skip' && def.catchUp !== 'latest' && def.catchUp !== 'all') fail(`${path}catchUp`, 'must be "skip", "latest" or "all"');
    wire.catchUp = def.catchUp;
  }
  if (def.catchUpLimit !== undefined) wire.catchUpLimit = checkInteger(def.catchUpLimit, `${path}catchUpLimit`, 1, LIMITS.batchSize);
  if (def.overlap !== undefined) {
    if (def.overlap !== 'allow' && def.overlap !== 'skip') fail(`${path}overlap`, 'must be "allow" or "skip"');
    wire.overlap = def.overlap;
  }
  if (def.missedAfterMs !== undefined) wire.missedAfterMs = checkInteger(def.missedAfterMs, `${path}missedAfterMs`, 1000, 86_400_000);
  return wire;
}

/** Checks a whole namespace's definitions (at most 1000, keys unique) and returns what SQL receives. */
export function toWireSchedules(namespace: unknown, definitions: unknown): WireScheduleDefinition[] {
  checkName(namespace, 'namespace');
  if (!Array.isArray(definitions)) fail('definitions', 'must be an array of schedule definitions');
  if (definitions.length > LIMITS.batchSize) {
    fail('definitions', `a namespace holds at most ${LIMITS.batchSize} schedules, got ${definitions.length}`);
  }
  const keys = new Set<string>();
  return definitions.map((definition: unknown, i) => {
    const wire = toWireSchedule(definition, `definitions[${i}].`);
    if (keys.has(wire.key)) fail(`definitions[${i}].key`, `"${wire.key}" is listed twice`);
    keys.add(wire.key);
    return wire;
  });
}
