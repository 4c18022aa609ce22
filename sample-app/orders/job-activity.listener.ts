import { Injectable, Logger } from '@nestjs/common';
import { OnWorkhorseEvent, type WorkerEventOf } from 'nestjs-workhorse';

/**
 * Logs what this process's worker does with jobs. The module itself logs only problems
 * (failures, retries, lost leases); claims and successes are logged here, through
 * `@OnWorkhorseEvent`, so the sample shows them. Events exist only in a process that runs a
 * worker; in the web-only API these methods are never called.
 */
@Injectable()
export class JobActivityListener {
  private readonly logger = new Logger('Jobs');

  @OnWorkhorseEvent('job.claimed')
  onClaimed(event: WorkerEventOf<'job.claimed'>): void {
    this.logger.log(`Claimed ${event.type} ${event.jobId}, attempt ${event.attempt}, as ${event.workerId}`);
  }

  @OnWorkhorseEvent('job.succeeded')
  onSucceeded(event: WorkerEventOf<'job.succeeded'>): void {
    this.logger.log(`${event.type} ${event.jobId} succeeded at attempt ${event.attempt} in ${event.durationMs} ms`);
  }
}
