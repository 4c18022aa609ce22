/**
 * The lines a worker logs about itself and its jobs (see {@link EventLog}). Every line about a
 * job starts with `Job <id> (<type>) attempt <n>`, so one search finds all of a job's lines.
 */
import type { AbandonReason, WorkerGroupInfo } from '../events';
import type { ErrorEnvelope } from '../types';

const ABANDON_CAUSES: Record<Exclude<AbandonReason, 'shutdown'>, string> = {
  timeout: 'its execution timeout passed',
  canceled: 'the job was canceled',
  lease_lost: 'the worker lost its lease',
  sleeping: 'it started a durable sleep',
};

function errorText(error: ErrorEnvelope): string {
  return `${error.name}: ${error.message}`;
}

const job = (jobId: string, type: string, attempt: number) => `Job ${jobId} (${type}) attempt ${attempt}`;

export const workerLogMessages = {
  workerStarted: (workerId: string, groups: readonly WorkerGroupInfo[]) =>
    groups.length === 1
      ? `Worker ${workerId} started on queue(s) ${groups[0].queues.join(', ')} with concurrency ${groups[0].concurrency}.`
      : `Worker ${workerId} started with ${groups.length} groups: ` +
        groups.map((g) => `${g.name} (queue(s) ${g.queues.join(', ')}, concurrency ${g.concurrency})`).join('; ') +
        '.',
  workerStopped: (workerId: string) => `Worker ${workerId} stopped.`,
  workerDraining: (workerId: string, activeCount: number) =>
    `Worker ${workerId} drains (an operator asked): it claims no more jobs and finishes the ${activeCount} it holds; stop its process once \`workhorse workers list\` shows it drained.`,
  workerError: (during: string, error: Error) => `Worker error while doing "${during}": ${error.message}`,
  workerReconnected: (workerId: string, during: string, failures: number, downMs: number) =>
    `Worker ${workerId}: the database is reachable again ("${during}" works after ${failures} failure(s) over ${(downMs / 1000).toFixed(1)} s).`,
  jobRetry: (jobId: string, type: string, attempt: number, error: ErrorEnvelope, runAt: Date) =>
    `${job(jobId, type, attempt)} failed with ${errorText(error)}; next attempt at ${runAt.toISOString()}.`,
  jobFailed: (jobId: string, type: string, attempt: number, error: ErrorEnvelope) =>
    `${job(jobId, type, attempt)} failed for good: ${errorText(error)}.`,
  jobCanceled: (jobId: string, type: string, attempt: number) => `${job(jobId, type, attempt)} was canceled while running.`,
  jobLeaseLost: (jobId: string, type: string, attempt: number) =>
    `${job(jobId, type, attempt)}: this worker lost its lease; the job's outcome is left to whichever worker owns it now.`,
  jobReleased: (jobId: string, type: string, attempt: number, reason: string) => `${job(jobId, type, attempt)} released: ${reason}.`,
  jobAbandoned: (jobId: string, type: string, attempt: number, reason: AbandonReason, abandonedCount: number) =>
    (reason === 'shutdown'
      ? `${job(jobId, type, attempt)} did not finish within shutdownTimeoutMs; it was aborted and will run again after its lease expires.`
      : `${job(jobId, type, attempt)}: its handler did not return within abandonAfterMs after its attempt ended (${ABANDON_CAUSES[reason]}); ` +
        'the worker abandoned it and freed its slot. Handlers should stop when ctx.signal aborts.') +
    ` Abandoned handlers still running: ${abandonedCount}.`,
};
