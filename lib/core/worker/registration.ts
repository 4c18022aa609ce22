import { hostname } from 'node:os';
import type { Pool } from 'pg';
import { reportedVersion } from '../package-version';
import { NotYoursError } from '../capability-errors';
import { fromPgError } from '../protocol/errors';
import { REPORT_WORKER, UNREGISTER_WORKER } from '../protocol/worker';
import type { EventHub } from './event-hub';

/** What the registration needs of its worker. */
export interface RegisteredWorker {
  readonly workerId: string;
  readonly queues: readonly string[];
  readonly concurrency: number;
  /** Jobs it holds now. */
  readonly activeCount: number;
}

/**
 * Keeps the worker in the registry of live workers (`report_worker_v2`, see sql/095_workers.sql):
 * a report every `periodMs` (the heartbeat interval) with the jobs it holds, whose answer says
 * whether an operator asked it to drain; and it leaves the registry when the worker stops. The
 * first report registers and returns a secret that binds the row to this worker: every later
 * report and the unregistering present it. A refused report (the row is gone, or another live
 * process holds the id) forgets the secret, so the next period registers again. The
 * reports go through the pool, one small statement per period: nothing of it runs per job.
 */
export class Registration {
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  private readonly info: string;
  private secret: string | null = null;

  constructor(
    private readonly pool: Pool,
    private readonly worker: RegisteredWorker,
    private readonly periodMs: number,
    private readonly hub: EventHub,
    /** An operator asked the worker to drain (called once per report that says so). */
    private readonly onDrainRequested: () => void,
  ) {
    this.info = JSON.stringify({
      host: hostname(),
      pid: process.pid,
      queues: worker.queues,
      concurrency: worker.concurrency,
      version: reportedVersion(),
      startedAt: new Date().toISOString(),
      periodMs,
    });
  }

  /** Reports now, then every period until {@link stop}. */
  start(): void {
    this.inFlight = this.report();
    this.timer = setInterval(() => {
      this.inFlight ??= this.report();
    }, this.periodMs);
    this.timer.unref();
  }

  /** Stops reporting and leaves the registry (a failure is reported; the row then turns `gone`). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.inFlight;
    try {
      if (this.secret !== null) await this.pool.query(UNREGISTER_WORKER, [this.worker.workerId, this.secret]);
      this.secret = null;
    } catch (error) {
      this.hub.reportError('report', error as Error);
    }
  }

  /** One report now (after the worker's state changed, so the registry shows it at once). */
  reportNow(): Promise<void> {
    this.inFlight ??= this.report();
    return this.inFlight;
  }

  private async report(): Promise<void> {
    try {
      const { rows } = await this.pool.query<{ drain: boolean; secret: string | null }>(
        REPORT_WORKER,
        [this.worker.workerId, this.info, this.worker.activeCount, this.secret],
      );
      this.secret = rows[0].secret ?? this.secret;
      this.hub.reportSuccess('report');
      if (rows[0].drain) this.onDrainRequested();
    } catch (error) {
      const refused = fromPgError(error);
      if (refused instanceof NotYoursError) this.secret = null;
      this.hub.reportError('report', refused as Error);
    } finally {
      this.inFlight = null;
    }
  }
}
