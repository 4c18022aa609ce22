/**
 * The options of `startEmbeddedPostgres`, and their checks: a typo or an impossible value is a
 * `WorkhorseValidationError` naming the option, before anything is started or written.
 */
import { WorkhorseValidationError } from '../core/errors';

/**
 * Options of `startEmbeddedPostgres`; every one may be left out.
 *
 * @example
 * await startEmbeddedPostgres({ dataDir: '.pgdata', port: 54329, password: 'dev', settings: ['max_connections=200'] });
 */
export interface EmbeddedPostgresOptions {
  /**
   * Keep the cluster in this directory: initialised on the first start, reused by later ones
   * (`password` is then required, as the cluster keeps the one it was created with). Default: a
   * new temporary directory, removed by `stop()` or when the process exits.
   */
  dataDir?: string;
  /** Listen on this port (of 127.0.0.1). Default: a free one. */
  port?: number;
  /** The superuser's name; default `postgres`. */
  user?: string;
  /** The superuser's password; default a random one (with a temporary directory). */
  password?: string;
  /** How clients prove the password; default `scram-sha-256` (`password` connects faster). */
  authMethod?: 'scram-sha-256' | 'password' | 'md5';
  /**
   * Whether a commit survives a crash of the machine (fsync, synchronous_commit and
   * full_page_writes on). Default: off with a temporary directory, which makes tests faster;
   * on with a `dataDir`.
   */
  durable?: boolean;
  /** More server settings, each `name=value`, e.g. `max_connections=300`. */
  settings?: readonly string[];
  /** How long one attempt to start may take; default 60 000 ms. */
  startTimeoutMs?: number;
}

export interface CheckedEmbeddedPostgresOptions {
  dataDir?: string;
  port?: number;
  user: string;
  password?: string;
  authMethod: 'scram-sha-256' | 'password' | 'md5';
  durable?: boolean;
  settings: readonly string[];
  startTimeoutMs: number;
}

const KEYS = new Set(['dataDir', 'port', 'user', 'password', 'authMethod', 'durable', 'settings', 'startTimeoutMs']);
const AUTH_METHODS = ['scram-sha-256', 'password', 'md5'] as const;
const SETTING = /^[A-Za-z_][A-Za-z0-9_.]*=[^\0\n]*$/;

function fail(field: string, message: string): never {
  throw new WorkhorseValidationError(field, message);
}

function optionalString(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.includes('\0')) fail(field, 'must be a non-empty string');
  return value;
}

export function checkEmbeddedPostgresOptions(options: EmbeddedPostgresOptions): CheckedEmbeddedPostgresOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) fail('options', 'must be an object');
  for (const key of Object.keys(options)) if (!KEYS.has(key)) fail(key, `is not an option of startEmbeddedPostgres (${[...KEYS].join(', ')})`);
  const { port, authMethod, durable, settings, startTimeoutMs } = options;
  if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 65535)) fail('port', 'must be an integer from 1 to 65535');
  if (authMethod !== undefined && !(AUTH_METHODS as readonly unknown[]).includes(authMethod)) fail('authMethod', `must be one of ${AUTH_METHODS.join(', ')}`);
  if (durable !== undefined && typeof durable !== 'boolean') fail('durable', 'must be true or false');
  if (settings !== undefined && !Array.isArray(settings)) fail('settings', 'must be an array of "name=value" strings');
  (settings ?? []).forEach((setting: unknown, i) => {
    if (typeof setting !== 'string' || !SETTING.test(setting)) fail(`settings[${i}]`, 'must be a "name=value" string, e.g. "max_connections=300"');
  });
  if (startTimeoutMs !== undefined && (!Number.isInteger(startTimeoutMs) || startTimeoutMs < 1)) fail('startTimeoutMs', 'must be a positive integer');
  const dataDir = optionalString(options.dataDir, 'dataDir');
  const password = optionalString(options.password, 'password');
  if (dataDir !== undefined && password === undefined) {
    fail('password', 'is required with dataDir: the cluster keeps the password it was created with, so every start must give it');
  }
  return {
    dataDir,
    port,
    user: optionalString(options.user, 'user') ?? 'postgres',
    password,
    authMethod: authMethod ?? 'scram-sha-256',
    durable,
    settings: settings ?? [],
    startTimeoutMs: startTimeoutMs ?? 60_000,
  };
}
