import { call, callOne } from '../protocol/call';
import { DRAIN_WORKER, HAS_LIST_WORKERS_V2, LIST_WORKERS, LIST_WORKERS_V1 } from '../protocol/admin';
import type { Queryable } from '../types';

/**
 * Where a registered worker stands: claiming (`running`); asked to drain and still finishing
 * jobs (`draining`); asked to drain and holding none, safe to stop (`drained`); or silent for
 * three of its report periods (`gone`: it crashed, hung or lost its connection; its jobs come
 * back when their leases expire).
 */
export type WorkerStatus = 'running' | 'draining' | 'drained' | 'gone';

/** A worker in the registry of live workers (`admin.listWorkers()`). */
export interface WorkerInfo {
  workerId: string;
  status: WorkerStatus;
  host: string;
  pid: number;
  queues: string[];
  concurrency: number;
  /** Jobs it held at its last report. */
  inFlight: number;
  /** The nestjs-workhorse version it runs. */
  version: string;
  startedAt: Date;
  lastSeenAt: Date;
  drainRequestedAt: Date | null;
  /** Who asked for the drain: the caller-chosen actor, and the login role (`session_user`) of the session that asked (null before the schema recorded it). */
  drainRequestedBy: string | null;
  drainLoginRole: string | null;
  drainReason: string | null;
}

/** What `admin.drainWorker()` did: asked now, asked before (the first request stands), or no such worker. */
export type DrainResult = 'requested' | 'already_requested' | 'not_found';

interface WorkerRow {
  worker_id: string;
  status: WorkerStatus;
  host: string;
  pid: number;
  queues: string[];
  concurrency: number;
  in_flight: number;
  version: string;
  started_at: Date;
  last_seen_at: Date;
  drain_requested_at: Date | null;
  drain_requested_by: string | null;
  drain_reason: string | null;
  /** Absent from `list_workers_v1`. */
  drain_login_role?: string | null;
}

const toWorkerInfo = (r: WorkerRow): WorkerInfo => ({
  workerId: r.worker_id,
  status: r.status,
  host: r.host,
  pid: r.pid,
  queues: r.queues,
  concurrency: r.concurrency,
  inFlight: r.in_flight,
  version: r.version,
  startedAt: r.started_at,
  lastSeenAt: r.last_seen_at,
  drainRequestedAt: r.drain_requested_at,
  drainRequestedBy: r.drain_requested_by,
  drainLoginRole: r.drain_login_role ?? null,
  drainReason: r.drain_reason,
});

/** The registered workers, newest first (`list_workers_v2`). */
export async function listWorkers(db: Queryable): Promise<WorkerInfo[]> {
  const rows = await call<WorkerRow>(db, LIST_WORKERS, []);
  return rows.map(toWorkerInfo);
}

/**
 * The same on whatever schema is installed, also one before step 13 (`workhorse schema
 * status` reads the live workers before a migration): `list_workers_v1`, without drain login
 * roles, where the schema has no `list_workers_v2` yet.
 */
export async function listWorkersOfAnySchema(db: Queryable): Promise<WorkerInfo[]> {
  const [{ present }] = await call<{ present: boolean }>(db, HAS_LIST_WORKERS_V2, []);
  const rows = await call<WorkerRow>(db, present ? LIST_WORKERS : LIST_WORKERS_V1, []);
  return rows.map(toWorkerInfo);
}

/** Asks one worker to drain (`drain_worker_v1`); the options are checked by the caller. */
export async function drainWorker(db: Queryable, workerId: string, actor: string | null, reason: string | null): Promise<DrainResult> {
  return (await callOne<{ result: DrainResult }>(db, DRAIN_WORKER, [workerId, actor, reason])).result;
}
