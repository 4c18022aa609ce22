import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Admin } from '../core/admin';
import { WorkhorseValidationError } from '../core/errors';
import { checkHealthThresholds, type HealthThresholds } from '../core/operator/health';
import { isAllowedHostEntry } from './allowed-hosts';
import type { DashboardAction } from './dashboard-actions';

/**
 * Decides whether a request may do an action: `true` allows it. Called for every request with
 * `read`, for job data with `read-data`, and for each change with its own action. The request is
 * the server's own (`IncomingMessage`, or the Express request that extends it), so the hook can
 * read the session, a header or the client certificate the application already trusts.
 */
export type DashboardAuthorize = (request: IncomingMessage, action: DashboardAction) => boolean | Promise<boolean>;

/** Options of `createDashboardHandler`, and of `WorkhorseDashboardModule.forRoot` but `admin`. */
export interface DashboardOptions {
  /** The operator client the dashboard reads and acts through. */
  admin: Admin;
  /**
   * Where the server mounts the dashboard, as the server sees request paths (with a Nest global
   * prefix, include it): `/workhorse`. Links are relative, so a proxy may serve it under any
   * further prefix.
   */
  path: string;
  /** See {@link DashboardAuthorize}. Required: there is no default that would be safe. */
  authorize: DashboardAuthorize;
  /** Show everything, change nothing: forms are not shown and every change is refused. Default false. */
  readOnly?: boolean;
  /**
   * Who is acting, recorded with every change (redrive, pause, cancel) next to the reason the
   * operator gives. Default `'dashboard'`.
   */
  actor?: (request: IncomingMessage) => string | Promise<string>;
  /**
   * Key of the forms' CSRF tokens, at least 32 characters. Give every instance of a deployment
   * the same one, so a form rendered by one instance is accepted by another. Default: a random
   * key per process (forms then go stale when the process restarts).
   */
  secret?: string;
  /**
   * Origins (`https://ops.example.com`) whose forms are accepted besides the request's own host,
   * for a proxy that rewrites the Host header. Browsers that send `Sec-Fetch-Site` need none.
   */
  trustedOrigins?: readonly string[];
  /**
   * The host names the dashboard answers on (the `Host` header, without its port), so that a
   * page of another site whose name is made to resolve to the dashboard's address (DNS
   * rebinding) is refused with a 421 and reads nothing: `ops.example.com`, `.example.com` for a
   * domain and its subdomains, an IP address. Loopback (`localhost`, `127.0.0.1`, `[::1]`) is
   * always served. Default: the first host an authorized reader reaches the dashboard on, kept
   * until the process ends; give the list in production (see docs/dashboard.md).
   */
  allowedHosts?: readonly string[];
  /** Told about errors the dashboard answers with a 500 page. Default: `console.error`. */
  onError?: (error: unknown) => void;
  /**
   * The thresholds of the health the overview shows (`admin.health(thresholds)`); each left out
   * keeps its default (docs/operations.md). Give the ones your alerts use, so both agree.
   */
  health?: HealthThresholds;
}

/** The options once checked, with defaults filled in. */
export interface ResolvedDashboardOptions {
  admin: Admin;
  path: string;
  authorize: DashboardAuthorize;
  readOnly: boolean;
  actor: (request: IncomingMessage) => string | Promise<string>;
  secret: string;
  trustedOrigins: readonly string[];
  /** Undefined: the first host reached is kept. */
  allowedHosts: readonly string[] | undefined;
  onError: (error: unknown) => void;
  health: HealthThresholds;
}

const KEYS = ['admin', 'path', 'authorize', 'readOnly', 'actor', 'secret', 'trustedOrigins', 'allowedHosts', 'onError', 'health'];
const PATH = /^(\/[A-Za-z0-9._~-]+)*\/?$/;

function fail(field: string, message: string): never {
  throw new WorkhorseValidationError(field, message);
}

function optionalFunction<T>(value: T | undefined, field: string): T | undefined {
  if (value !== undefined && typeof value !== 'function') fail(field, 'must be a function');
  return value;
}

/** The `health` option, checked as `admin.health()` checks it, its fields named from `health`. */
function healthOf(value: unknown): HealthThresholds {
  if (value === undefined) return {};
  try {
    return checkHealthThresholds(value);
  } catch (error) {
    if (!(error instanceof WorkhorseValidationError)) throw error;
    return fail(`health${error.field.slice('thresholds'.length)}`, error.message.replace(/^[^:]*: /, ''));
  }
}

/** Checks the options of the dashboard, naming the first bad one. */
export function resolveDashboardOptions(options: DashboardOptions): ResolvedDashboardOptions {
  if (typeof options !== 'object' || options === null) fail('options', 'must be an object');
  for (const key of Object.keys(options)) {
    if (!KEYS.includes(key)) fail(key, `is not a dashboard option (${KEYS.join(', ')})`);
  }
  const { admin, path, authorize, readOnly, secret, trustedOrigins, allowedHosts } = options;
  if (typeof admin !== 'object' || admin === null || typeof admin.listJobs !== 'function') {
    fail('admin', 'must be an Admin (new Admin(pool), or the one Nest injects)');
  }
  if (typeof path !== 'string' || !path.startsWith('/') || path.includes('//') || !PATH.test(path) || /\/\.\.?(\/|$)/.test(path)) {
    fail('path', 'must be an absolute path of letters, digits and . _ ~ - segments, such as /workhorse');
  }
  if (typeof authorize !== 'function') fail('authorize', 'must be a function (request, action) => boolean');
  if (readOnly !== undefined && typeof readOnly !== 'boolean') fail('readOnly', 'must be true or false');
  if (secret !== undefined && (typeof secret !== 'string' || secret.length < 32)) fail('secret', 'must be a string of at least 32 characters');
  if (trustedOrigins !== undefined) {
    if (!Array.isArray(trustedOrigins)) fail('trustedOrigins', 'must be an array of origins');
    for (const origin of trustedOrigins) {
      if (typeof origin !== 'string' || !URL.canParse(origin) || new URL(origin).origin !== origin) {
        fail('trustedOrigins', `must hold origins such as https://ops.example.com (scheme, host and port only), got ${JSON.stringify(origin)}`);
      }
    }
  }
  if (allowedHosts !== undefined) {
    if (!Array.isArray(allowedHosts)) fail('allowedHosts', 'must be an array of host names');
    for (const entry of allowedHosts) {
      if (!isAllowedHostEntry(entry)) {
        fail('allowedHosts', `must hold host names such as ops.example.com or .example.com (no scheme, no port), got ${JSON.stringify(entry)}`);
      }
    }
  }
  const actor = optionalFunction(options.actor, 'actor');
  const onError = optionalFunction(options.onError, 'onError');
  const health = healthOf(options.health);
  return {
    admin,
    path: path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path,
    authorize,
    readOnly: readOnly ?? false,
    actor: actor ?? (() => 'dashboard'),
    secret: secret ?? randomBytes(32).toString('base64url'),
    trustedOrigins: trustedOrigins ?? [],
    allowedHosts: allowedHosts === undefined ? undefined : [...allowedHosts],
    onError: onError ?? ((error) => console.error('workhorse dashboard:', error)),
    health,
  };
}
