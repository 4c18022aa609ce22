import type { Pool } from 'pg';
import { DedicatedConnection } from '../connection';
import { HEARTBEAT_MANY } from '../protocol/worker';

/** A lease the heartbeater keeps alive (the worker's record of a job it runs). */
export interface HeldLease {
  readonly job: LeaseOf;
  /** Local deadline (ms since epoch) after which the lease must be presumed lost. */
  deadline: number;
  /** Renewed while true. The worker clears it when it no longer needs the lease, the heartbeater when it gives the lease up. */
  renewing: boolean;
}

/** Whose lease it is: the job and the fence token of its claim. */
export interface LeaseOf {
  readonly jobId: string;
  readonly fenceToken: string;
}

/**
 * `"jobId":"...","fence":...` of a lease, for the JSON of a request. The id and the fence are what
 * the database returned for the claim (a uuid and an int8 in their text forms, valid JSON as
 * they are: the fence goes as a number, verbatim, so no precision is lost).
 */
export function leaseFields(lease: LeaseOf): string {
  return `"jobId":"${lease.jobId}","fence":${lease.fenceToken}`;
}

/** What the heartbeater tells its worker about a lease (one listener for all of them). */
export interface LeaseListener {
  /** The lease was not renewed in time, or the server says another owner has the job. */
  lost(jobId: string): void;
  /** The job's cancellation was requested; the lease stays renewed until the worker acknowledges. */
  cancelRequested(jobId: string): void;
}

interface HeartbeatRow {
  job_id: string;
  status: 'accepted' | 'cancel_requested' | 'busy' | 'stale';
}

/**
 * Renews every lease the worker holds in one `heartbeat_many_v1` round per interval, on a
 * connection of its own so that busy handlers holding pool connections cannot starve renewal.
 * A lease that could not be renewed within its length is given up locally (the handler's signal
 * aborts) before the server could hand the job to someone else.
 */
export class Heartbeater {
  private readonly connection: DedicatedConnection;
  private timer: NodeJS.Timeout | null = null;
  private round: Promise<void> | null = null;

  constructor(
    pool: Pool,
    private readonly workerId: string,
    private readonly leaseMs: number,
    private readonly intervalMs: number,
    private readonly onError: (error: Error) => void,
    private readonly listener: LeaseListener,
    /**
     * The worker's own map of the jobs it runs, by job id (read, never changed, here): no second
     * map to keep in step, which would cost two more map operations per job.
     */
    private readonly leases: ReadonlyMap<string, HeldLease>,
    /** A round of renewals went through (after failures: the database is reachable again). */
    private readonly onRenewed: () => void = () => undefined,
  ) {
    this.connection = new DedicatedConnection(pool.options, onError);
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.round ??= this.beat().finally(() => {
        this.round = null;
      });
    }, this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.round;
    await this.connection.close();
  }

  private async beat(): Promise<void> {
    const now = Date.now();
    const batch: HeldLease[] = [];
    const lost: HeldLease[] = [];
    for (const lease of this.leases.values()) {
      if (!lease.renewing) continue;
      if (now >= lease.deadline) lost.push(lease);
      else batch.push(lease);
    }
    for (const lease of lost) {
      lease.renewing = false;
      this.listener.lost(lease.job.jobId);
    }
    if (batch.length === 0) return;
    const sentAt = Date.now();
    let rows: HeartbeatRow[];
    try {
      const result = await this.connection.query(HEARTBEAT_MANY, [
        this.workerId,
        leasesJson(batch),
        this.leaseMs,
      ]);
      rows = result.rows as HeartbeatRow[];
    } catch (error) {
      this.onError(error as Error);
      return;
    }
    this.onRenewed();
    // Answers go to the leases that were sent: by the time one arrives, the job's attempt may have
    // ended and the same job been claimed again under a new fence, and a `stale` for the old lease
    // must not cost the new one.
    const sent = new Map(batch.map((lease) => [lease.job.jobId, lease]));
    for (const row of rows) {
      const lease = sent.get(row.job_id);
      if (!lease?.renewing) continue;
      if (row.status === 'stale') {
        lease.renewing = false;
        this.listener.lost(row.job_id);
      } else if (row.status !== 'busy') {
        // The server renewed the lease after we sent the request, so this bound is safe.
        lease.deadline = sentAt + this.leaseMs;
        if (row.status === 'cancel_requested') this.listener.cancelRequested(row.job_id);
      }
    }
  }
}

/** `[{"jobId", "fence"}]` as JSON text (the heartbeat request). */
function leasesJson(leases: HeldLease[]): string {
  return `[${leases.map((l) => `{${leaseFields(l.job)}}`).join(',')}]`;
}
