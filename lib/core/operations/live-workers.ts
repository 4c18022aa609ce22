import { call, callOne } from '../protocol/call';
import { DRAIN_WORKER, LIST_WORKERS } from '../protocol/admin';
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
  drainRequestedBy: string | null;
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
}

/** The registered workers, newest first (`list_workers_v1`). */
export async function listWorkers(db: Queryable): Promise<WorkerInfo[]> {
  const rows = await call<WorkerRow>(db, LIST_WORKERS, []);
  return rows.map((r) => ({
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
    drainReason: r.drain_reason,
  }));
}

/** Asks one worker to drain (`drain_worker_v1`); the options are checked by the caller. */
export async function drainWorker(db: Queryable, workerId: string, actor: string | null, reason: string | null): Promise<DrainResult> {
  return (await callOne<{ result: DrainResult }>(db, DRAIN_WORKER, [workerId, actor, reason])).result;
}
