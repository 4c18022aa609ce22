import { randomBytes } from 'node:crypto';
/**
 * The sample app's settings, all from environment variables, checked once at start-up so a typo
 * fails with the variable's name instead of a confusing error later.
 *
 * | variable | default | meaning |
 * |---|---|---|
 * | `DATABASE_URL` | (embedded) | The database. Without it the app starts an embedded PostgreSQL. |
 * | `SAMPLE_PG_PORT` | `54329` | Port of the embedded PostgreSQL. |
 * | `PORT` | `3000` | HTTP port (`0`: any free port). |
 * | `HOST` | `127.0.0.1` | HTTP address. |
 * | `SAMPLE_WORKER_ID` | `host:pid:random` | The worker's id in leases and history. |
 * | `SAMPLE_LEASE_MS` | `30000` | The worker's lease length. |
 * | `SAMPLE_CONCURRENCY` | `5` | Jobs the worker runs at once. |
 * | `SAMPLE_LABEL_DELAY_MS` | `0` | The label stage waits this long first (the demo kills the worker then). |
 * | `SAMPLE_LOG_FORMAT` | `text` | `json`: one JSON object per log line. |
 * | `SAMPLE_OPERATOR_TOKEN` | (random) | Lets a request see job data and make changes in the dashboard. |
 */
export interface SampleConfig {
  databaseUrl: string | undefined;
  embeddedPort: number;
  httpPort: number;
  httpHost: string;
  workerId: string | undefined;
  leaseMs: number | undefined;
  concurrency: number;
  labelDelayMs: number;
  logFormat: 'text' | 'json';
  /** Given, or drawn at random at start-up (and printed). */
  operatorToken: string;
}

/** A variable that is set but unusable. */
export class SampleConfigError extends Error {
  override readonly name = 'SampleConfigError';
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new SampleConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function optional(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw.trim() === '' ? undefined : raw.trim();
}

export function readSampleConfig(env: NodeJS.ProcessEnv = process.env): SampleConfig {
  const logFormat = optional(env, 'SAMPLE_LOG_FORMAT') ?? 'text';
  if (logFormat !== 'text' && logFormat !== 'json') {
    throw new SampleConfigError(`SAMPLE_LOG_FORMAT must be "text" or "json", got "${logFormat}"`);
  }
  const lease = optional(env, 'SAMPLE_LEASE_MS');
  return {
    databaseUrl: optional(env, 'DATABASE_URL'),
    embeddedPort: integer(env, 'SAMPLE_PG_PORT', 54329, 1, 65535),
    httpPort: integer(env, 'PORT', 3000, 0, 65535),
    httpHost: optional(env, 'HOST') ?? '127.0.0.1',
    workerId: optional(env, 'SAMPLE_WORKER_ID'),
    leaseMs: lease === undefined ? undefined : integer(env, 'SAMPLE_LEASE_MS', 30_000, 1_000, 3_600_000),
    concurrency: integer(env, 'SAMPLE_CONCURRENCY', 5, 1, 100),
    labelDelayMs: integer(env, 'SAMPLE_LABEL_DELAY_MS', 0, 0, 3_600_000),
    logFormat,
    operatorToken: optional(env, 'SAMPLE_OPERATOR_TOKEN') ?? randomBytes(12).toString('hex'),
  };
}
