import { WORKER_EVENT_NAMES, type WorkerEvent, type WorkerEventName, type WorkerEventOf } from '../events';
import { workerLogMessages as messages } from './worker-log.messages';

/**
 * Where a worker writes its log lines: Nest's `Logger` (the Nest module passes one), `console`,
 * or any logger with these methods (pino and winston through a small adapter). Levels: `error`
 * for failed internal operations, `warn` for jobs that failed, were retried, lost their lease,
 * were released or abandoned, and for drains; `log` for start, stop, reconnection and
 * cancellations. Claims and successes are never logged (they would flood the log): count them
 * with metrics.
 */
export interface WorkhorseLogger {
  log(message: string): void;
  warn(message: string): void;
  /** `stack` is given with the first failure of each kind of operation. */
  error(message: string, stack?: string): void;
}

/**
 * Turns worker events into log lines. While the database is down every tick, claim and
 * reconnect fails: it logs the first failure of each kind with its stack, then at most one line
 * per kind every 30 s with the count since.
 *
 * @example
 * const log = new EventLog(console);
 * worker.on(log.names, (event) => log.write(event));
 */
export class EventLog {
  /** The events it logs: problems, start, stop, drains and cancellations; never claims or successes. */
  readonly names: readonly WorkerEventName[];
  private readonly errors = new Map<string, { lastAt: number; suppressed: number }>();
  private readonly lines: { [N in WorkerEventName]: ((event: WorkerEventOf<N>) => void) | null };

  constructor(private readonly logger: WorkhorseLogger) {
    // How each event is logged (null: not at all). A new event of the union must get an entry
    // here, or this does not compile.
    this.lines = {
      'worker.started': (e) => logger.log(messages.workerStarted(e.workerId, e.groups)),
      'worker.stopped': (e) => logger.log(messages.workerStopped(e.workerId)),
      'worker.draining': (e) => logger.warn(messages.workerDraining(e.workerId, e.activeCount)),
      'worker.error': (e) => this.error(e.during, e.error),
      'worker.reconnected': (e) => {
        // The next outage's first failure is logged in full again.
        this.errors.delete(e.during);
        logger.log(messages.workerReconnected(e.workerId, e.during, e.failures, e.downMs));
      },
      'job.retry_scheduled': (e) => logger.warn(messages.jobRetry(e.jobId, e.type, e.attempt, e.error, e.runAt)),
      'job.failed': (e) => logger.warn(messages.jobFailed(e.jobId, e.type, e.attempt, e.error)),
      'job.canceled': (e) => logger.log(messages.jobCanceled(e.jobId, e.type, e.attempt)),
      'job.lease_lost': (e) => logger.warn(messages.jobLeaseLost(e.jobId, e.type, e.attempt)),
      'job.released': (e) => logger.warn(messages.jobReleased(e.jobId, e.type, e.attempt, e.reason)),
      'job.abandoned': (e) => logger.warn(messages.jobAbandoned(e.jobId, e.type, e.attempt, e.reason, e.abandonedCount)),
      'job.claimed': null,
      'job.succeeded': null,
      'job.sleeping': null,
      'job.blocked': null,
    };
    this.names = WORKER_EVENT_NAMES.filter((name) => this.lines[name] !== null);
  }

  /** Logs the event, if it is one that is logged. */
  write(event: WorkerEvent): void {
    (this.lines[event.name] as ((e: WorkerEvent) => void) | null)?.(event);
  }

  private error(during: string, error: Error): void {
    const now = Date.now();
    const seen = this.errors.get(during);
    if (seen && now - seen.lastAt < 30_000) {
      seen.suppressed++;
      return;
    }
    const suppressed = seen?.suppressed ?? 0;
    this.errors.set(during, { lastAt: now, suppressed: 0 });
    const message = messages.workerError(during, error);
    this.logger.error(suppressed > 0 ? `${message} (${suppressed} more since the last report)` : message, seen ? undefined : error.stack);
  }
}
