import type { Pool } from 'pg';
import { CheckedOutClient } from './checked-out-client';
import { applyConnectTimeout } from './connect-timeout';
import { fromPgError } from './protocol/errors';
import { GRANT_ROLE_SQL, SET_GRANT_SETTINGS } from './protocol/grants';
import { BEGIN, COMMIT, ROLLBACK } from './protocol/session';
import { WorkhorseValidationError } from './errors';

export { GRANT_ROLE_SQL };

/** Every capability, in the order a deployment usually introduces them. */
export const CAPABILITIES = ['producer', 'worker', 'operator'] as const;

/**
 * What a role may do with the queue. Each is a set of protocol functions (listed in
 * `sql/990_privileges.sql`); a role may hold several.
 * - `producer`: enqueue, and read the jobs its login role enqueued (`Queue.getJob`); send signals
 *   and record human decisions (`Queue.sendSignal`, `Queue.completeHumanWait`);
 * - `worker`: claim, renew leases, complete, fail, release, checkpoint, sleep, wait for signals
 *   and decisions, report progress, acknowledge cancels, offer maintenance ticks (`Worker`);
 * - `operator`: read every job and its history, cancel, pause and resume queues, list and redrive
 *   dead letters, list human waits, send signals and record decisions, run maintenance and
 *   retention (`Admin`, the CLI).
 */
export type Capability = (typeof CAPABILITIES)[number];


function checkCapabilities(value: unknown): readonly Capability[] {
  const list: unknown[] = Array.isArray(value) ? value : [value];
  const known: readonly string[] = CAPABILITIES;
  if (list.length === 0 || list.some((c) => typeof c !== 'string' || !known.includes(c)) || new Set(list).size !== list.length) {
    throw new WorkhorseValidationError('capabilities', `must be one or more of ${CAPABILITIES.join(', ')}, each once`);
  }
  return list as Capability[];
}

/**
 * Grants an existing role what one or more capabilities need to use an installed `workhorse`
 * schema, and nothing to read or write its tables, alter or drop it. Run it as the schema's
 * owner (whoever ran `installSchema`) or a superuser, once per role and again after each fresh
 * schema installation. The grant is recorded in the schema: a migration step that adds a protocol
 * function grants it to the roles of its capability, so upgrades need no new grants. Idempotent;
 * grants add up.
 *
 * @example
 * await installSchema(ownerPool);
 * await grantRole(ownerPool, 'checkout_api', 'producer');
 * await grantRole(ownerPool, 'checkout_worker', 'worker');
 * await grantRole(ownerPool, 'ops', ['operator']);
 */
export async function grantRole(pool: Pool, role: string, capabilities: Capability | readonly Capability[]): Promise<void> {
  if (typeof role !== 'string' || role.length === 0 || role.length > 63 || role.includes('\u0000')) {
    throw new WorkhorseValidationError('role', 'must be the name of an existing role (1 to 63 characters)');
  }
  const granted = checkCapabilities(capabilities);
  applyConnectTimeout(pool);
  const checkedOut = await CheckedOutClient.take(pool).catch((error: unknown) => Promise.reject(fromPgError(error, pool)));
  const { client } = checkedOut;
  try {
    await client.query(BEGIN);
    await client.query(SET_GRANT_SETTINGS, [role, granted.join(',')]);
    await client.query(GRANT_ROLE_SQL);
    await client.query(COMMIT);
  } catch (error) {
    await client.query(ROLLBACK).catch(() => undefined);
    throw fromPgError(error, pool);
  } finally {
    checkedOut.release();
  }
}

/**
 * Grants an existing role all three capabilities (producer, worker and operator): one role for
 * an application that enqueues, runs workers and administers. See {@link grantRole} for
 * narrower roles.
 *
 * @example
 * await installSchema(ownerPool);
 * await grantAppRole(ownerPool, 'app');
 */
export async function grantAppRole(pool: Pool, role: string): Promise<void> {
  return grantRole(pool, role, CAPABILITIES);
}
