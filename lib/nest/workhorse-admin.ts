import type { Pool } from 'pg';
import { Admin } from '../core/admin';
import type {
  ActorOptions,
  CancelResult,
  DeadLetterFilter,
  JobSnapshot,
  ListDeadLettersOptions,
  ListJobsFilter,
  Page,
  Queryable,
  QueueInfo,
  RedriveManyOptions,
  RedriveOptions,
  RedriveResult,
  TimelineEntry,
  TimelineOptions,
} from '../core/types';
import type { WorkhorseTransactionHost } from './workhorse-transaction.host';

/**
 * The `Admin` that Nest injects: with no client argument every call runs in the current
 * transaction of the host (so it sees the transaction's own uncommitted jobs, and its writes
 * commit or roll back with it), on the pool outside one. Every public method of the core class
 * is overridden here; a test fails when the core gains one that is not.
 */
export class WorkhorseAdmin extends Admin {
  constructor(
    pool: Pool,
    private readonly host: WorkhorseTransactionHost,
  ) {
    super(pool);
  }

  override getJob(jobId: string, client?: Queryable): Promise<JobSnapshot | null> {
    return super.getJob(jobId, client ?? this.host.client);
  }

  override getJobTimeline(jobId: string, options?: TimelineOptions, client?: Queryable): Promise<Page<TimelineEntry>> {
    return super.getJobTimeline(jobId, options, client ?? this.host.client);
  }

  override listJobs(filter?: ListJobsFilter, client?: Queryable): Promise<Page<JobSnapshot>> {
    return super.listJobs(filter, client ?? this.host.client);
  }

  override cancel(jobId: string, options?: { reason?: string }, client?: Queryable): Promise<CancelResult> {
    return super.cancel(jobId, options, client ?? this.host.client);
  }

  override listDeadLetters(options?: ListDeadLettersOptions, client?: Queryable): Promise<Page<JobSnapshot>> {
    return super.listDeadLetters(options, client ?? this.host.client);
  }

  override redrive(jobId: string, options: RedriveOptions, client?: Queryable): Promise<string> {
    return super.redrive(jobId, options, client ?? this.host.client);
  }

  override redriveMany(filter: DeadLetterFilter, options: RedriveManyOptions, client?: Queryable): Promise<RedriveResult[]> {
    return super.redriveMany(filter, options, client ?? this.host.client);
  }

  override pauseQueue(queue: string, options?: ActorOptions, client?: Queryable): Promise<QueueInfo> {
    return super.pauseQueue(queue, options, client ?? this.host.client);
  }

  override resumeQueue(queue: string, options?: ActorOptions, client?: Queryable): Promise<QueueInfo> {
    return super.resumeQueue(queue, options, client ?? this.host.client);
  }

  override listQueues(client?: Queryable): Promise<QueueInfo[]> {
    return super.listQueues(client ?? this.host.client);
  }
}
