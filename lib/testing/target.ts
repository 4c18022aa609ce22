import type { INestApplicationContext } from '@nestjs/common';
import type { Pool } from 'pg';
import { Admin } from '../core/admin';
import { WorkhorseValidationError } from '../core/errors';
import type { Queue } from '../core/queue';
import type { Worker } from '../core/worker/worker';

/**
 * The core objects the testing helpers work on without Nest: the pool (or the `Queue` or
 * `Admin`, which carry theirs), and for {@link drainWorkhorse} the core `Worker` whose handlers
 * run the jobs.
 *
 * @example
 * const queue = new Queue(pool);
 * const worker = new Worker(queue).handle('email.send', send);
 * await drainWorkhorse({ queue, worker });
 */
export interface WorkhorseCore {
  pool?: Pool;
  queue?: Queue;
  admin?: Admin;
  worker?: Worker;
}

/** What a testing helper takes: the Nest application (or testing module), or the {@link WorkhorseCore} objects. */
export type WorkhorseTestTarget = INestApplicationContext | WorkhorseCore;

/** Whether the target is a Nest application or testing module (it has `get()` and `select()`). */
export function isNestTarget(target: WorkhorseTestTarget): target is INestApplicationContext {
  const app = target as Partial<INestApplicationContext>;
  return typeof app.get === 'function' && typeof app.select === 'function';
}

/** One Admin per pool the helpers were given without one. */
const admins = new WeakMap<Pool, Admin>();

/** The Admin the helpers read through: the application's, the given one, or one on the given pool. */
export function adminOf(target: WorkhorseTestTarget): Admin {
  if (isNestTarget(target)) return target.get(Admin);
  if (typeof target !== 'object' || target === null) throw new WorkhorseValidationError('target', 'must be the Nest application or { pool, queue, admin, worker }');
  if (target.admin) return target.admin;
  const pool = target.pool ?? target.queue?.pool;
  if (!pool) throw new WorkhorseValidationError('target', 'give the pool, the queue or an admin (the helpers read the jobs through an Admin)');
  let admin = admins.get(pool);
  if (!admin) admins.set(pool, (admin = new Admin(pool)));
  return admin;
}
