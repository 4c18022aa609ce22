/**
 * Text views for people: aligned tables and key-value blocks of jobs and timelines. Scripts
 * should use `--json` instead; these layouts may change between releases.
 */
import { describeLimits } from '../core/queue-info';
import type { ErrorEnvelope, JobSnapshot, QueueInfo, RedriveResult, TimelineEntry } from '../core/types';
import type { HumanWait } from '../core/waits';
import type { HealthReport } from '../core/operator/health';
import type { WorkerInfo } from '../core/operator/live-workers';
import type { OperatorChange } from '../core/operator/operator-changes';
import { oneLine, printable } from './output';
import { shownLoginRole } from '../core/timeline';

const GAP = '  ';
const NONE = '-';

/**
 * Rows of cells, each column padded to its widest cell; no line ends in spaces. The last cell of
 * a row may hold several lines, which continue under its first; every other cell is one line
 * (a line break or control character in it is written escaped).
 */
export function formatColumns(rows: readonly (readonly string[])[]): string {
  const single = rows.map((row) => row.map((cell, column) => (column < row.length - 1 ? printable(cell) : cell)));
  const widths: number[] = [];
  for (const row of single) {
    row.slice(0, -1).forEach((cell, column) => (widths[column] = Math.max(widths[column] ?? 0, cell.length)));
  }
  return single
    .map((cells) => {
      const lead = cells.slice(0, -1).map((cell, column) => cell.padEnd(widths[column]) + GAP).join('');
      const [first, ...more] = (cells[cells.length - 1] ?? '').split('\n');
      return [lead + first, ...more.map((line) => ' '.repeat(lead.length) + line)].map((line) => line.trimEnd()).join('\n');
    })
    .join('\n');
}

/** A header row over rows of cells, aligned by {@link formatColumns}. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return formatColumns([header, ...rows]);
}

/** `Key  value` lines with the values aligned; a value's further lines are indented to match. */
export function formatFields(fields: readonly (readonly [string, string])[]): string {
  const width = Math.max(...fields.map(([key]) => key.length));
  const indent = ' '.repeat(width + GAP.length);
  return fields
    .flatMap(([key, value]) => value.split('\n').map((line, i) => `${i === 0 ? key.padEnd(width) + GAP : indent}${line}`.trimEnd()))
    .join('\n');
}

export function formatDate(date: Date | null): string {
  return date === null ? NONE : date.toISOString();
}

/** JSON on one line, for payloads, results and event data. */
export function formatJson(value: unknown): string {
  return JSON.stringify(value ?? null);
}

function formatError(error: ErrorEnvelope): string {
  return `${error.name}: ${error.message}`;
}

// The stack's own first lines repeat name and message, which the Error row already shows.
function stackFrames(stack: string | undefined): string | null {
  if (!stack) return null;
  const frames = stack
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith('at '));
  return frames.length === 0 ? null : frames.join('\n');
}

/** One job as a key-value block; rows that do not apply to the job's state are left out. */
export function formatJob(job: JobSnapshot): string {
  const fields: [string, string][] = [
    ['ID', job.id],
    ['State', job.state],
    ['Queue', job.queue],
    ['Type', job.type],
    ['Priority', String(job.priority)],
    ['Attempts', `${job.currentAttempt} of ${job.maxAttempts}`],
    ['Retry policy', job.retryPolicy ? formatJson(job.retryPolicy) : 'default (the handler\'s, else exponential)'],
    ['Tags', job.tags.length === 0 ? NONE : job.tags.map(printable).join(', ')],
    ['Created', formatDate(job.createdAt)],
    ['Run at', formatDate(job.runAt)],
  ];
  if (job.deadline) fields.push(['Deadline', formatDate(job.deadline)]);
  if (job.executionTimeoutMs !== null) fields.push(['Timeout', `${job.executionTimeoutMs} ms per attempt`]);
  if (job.finishedAt) fields.push(['Finished', formatDate(job.finishedAt)]);
  if (job.workerId) fields.push(['Worker', printable(job.workerId)]);
  if (job.leaseExpiresAt) fields.push(['Lease expires', formatDate(job.leaseExpiresAt)]);
  if (job.cancelRequestedAt) fields.push(['Cancel requested', formatDate(job.cancelRequestedAt)]);
  if (job.redrivenFrom) fields.push(['Redriven from', job.redrivenFrom]);
  if (job.redrivenTo.length > 0) fields.push(['Redriven to', job.redrivenTo.join('\n')]);
  fields.push(['Payload', formatJson(job.payload)]);
  if (job.progress !== null) fields.push(['Progress', formatJson(job.progress)]);
  if (job.state === 'succeeded') fields.push(['Result', formatJson(job.result)]);
  if (job.error) {
    fields.push([job.finishedAt ? 'Error' : 'Last error', printable(formatError(job.error))]);
    const frames = stackFrames(job.error.stack);
    if (frames) fields.push(['Stack', frames]);
  }
  return formatFields(fields);
}

/** Jobs as a table, one row each. */
export function formatJobTable(jobs: readonly JobSnapshot[]): string {
  return formatTable(
    ['ID', 'STATE', 'QUEUE', 'TYPE', 'ATTEMPTS', 'PRIORITY', 'CREATED'],
    jobs.map((job) => [
      job.id,
      job.state,
      job.queue,
      job.type,
      `${job.currentAttempt}/${job.maxAttempts}`,
      String(job.priority),
      formatDate(job.createdAt),
    ]),
  );
}

/** Open human waits as a table; choices and context as one-line JSON (control characters escaped). */
export function formatHumanWaitTable(waits: readonly HumanWait[]): string {
  return formatTable(
    ['JOB', 'QUEUE', 'TYPE', 'NAME', 'SINCE', 'TIMEOUT', 'CHOICES', 'CONTEXT'],
    waits.map((wait) => [
      wait.jobId,
      wait.queue,
      wait.type,
      formatJson(wait.name),
      formatDate(wait.createdAt),
      formatDate(wait.timeoutAt),
      wait.choices === null ? NONE : formatJson(wait.choices),
      formatJson(wait.context),
    ]),
  );
}

/** Dead letters as a table: what failed, where, with which final error, and when. */
export function formatDeadLetterTable(jobs: readonly JobSnapshot[]): string {
  return formatTable(
    ['ID', 'TYPE', 'QUEUE', 'ERROR', 'FINISHED', 'ATTEMPTS'],
    jobs.map((job) => [
      job.id,
      job.type,
      job.queue,
      job.error?.name ?? NONE,
      formatDate(job.finishedAt),
      `${job.currentAttempt}/${job.maxAttempts}`,
    ]),
  );
}

/** Redrive pairs: each dead letter and the job created from it (`-` in a dry run). */
export function formatRedriveTable(results: readonly RedriveResult[]): string {
  return formatTable(
    ['SOURCE JOB', 'NEW JOB'],
    results.map((result) => [result.sourceJobId, result.newJobId ?? NONE]),
  );
}

/** Queues with their pause state and live counts; the reason comes last, as free text. */
/** A queue's limits in words (`at most 5 active, 50 per 1000 ms`), or `-` for none. */
export function formatLimits(queue: Pick<QueueInfo, 'concurrency' | 'rateLimit'> & Partial<Pick<QueueInfo, 'perKey'>>): string {
  return describeLimits(queue) ?? NONE;
}

export function formatQueueTable(queues: readonly QueueInfo[]): string {
  return formatTable(
    ['QUEUE', 'PAUSED', 'READY', 'SCHEDULED', 'ACTIVE', 'BLOCKED', 'LIMITS', 'CHANGED AT', 'CHANGED BY', 'LOGIN ROLE', 'REASON'],
    queues.map((queue) => [
      queue.queue,
      queue.paused ? 'yes' : 'no',
      String(queue.ready),
      String(queue.scheduled),
      String(queue.active),
      String(queue.blocked),
      formatLimits(queue),
      formatDate(queue.changedAt),
      queue.changedBy ?? NONE,
      queue.loginRole ?? NONE,
      queue.reason === null ? NONE : oneLine(queue.reason),
    ]),
  );
}

export function formatWorkerTable(workers: readonly WorkerInfo[]): string {
  return formatTable(
    ['WORKER', 'STATUS', 'HOST', 'PID', 'QUEUES', 'CONCURRENCY', 'IN FLIGHT', 'VERSION', 'STARTED', 'LAST SEEN', 'DRAIN BY', 'LOGIN ROLE'],
    workers.map((w) => [
      w.workerId,
      w.status,
      w.host,
      String(w.pid),
      w.queues.join(','),
      String(w.concurrency),
      String(w.inFlight),
      w.version,
      formatDate(w.startedAt),
      formatDate(w.lastSeenAt),
      w.drainRequestedAt === null ? NONE : w.drainRequestedBy ?? NONE,
      w.drainLoginRole ?? NONE,
    ]),
  );
}

/** Operator changes, newest first: when, the actor and the login role, what, about which queue or worker, why. */
export function formatOperatorChanges(changes: readonly OperatorChange[]): string {
  return formatTable(
    ['AT', 'ACTOR', 'LOGIN ROLE', 'KIND', 'SUBJECT', 'DETAIL', 'REASON'],
    changes.map((c) => [
      formatDate(c.at),
      c.actor ?? NONE,
      c.loginRole,
      c.kind,
      c.subject ?? NONE,
      c.detail === null ? NONE : oneLine(JSON.stringify(c.detail)),
      c.reason === null ? NONE : oneLine(c.reason),
    ]),
  );
}

/** The status, its reasons (critical first) and the queues' numbers. */
export function formatHealth(report: HealthReport): string {
  const lines = [`Status: ${report.status}`];
  if (report.reasons.length > 0) {
    lines.push('', formatTable(['LEVEL', 'REASON', 'QUEUE', 'VALUE', 'THRESHOLD'],
      report.reasons.map((r) => [r.level, r.code, r.queue ?? NONE, String(r.value), String(r.threshold)])));
  }
  if (report.queues.length > 0) {
    lines.push('', formatTable(['QUEUE', 'READY', 'SCHEDULED', 'ACTIVE', 'BLOCKED', 'OLDEST READY MS', 'EXPIRED LEASES', 'FAILED 1H'],
      report.queues.map((q) => [q.queue, String(q.ready), String(q.scheduled), String(q.active), String(q.blocked),
        String(q.oldestReadyMs), String(q.expiredLeases), String(q.failedLastHour)])));
  }
  const { workers, retention } = report;
  lines.push('', `Workers: ${workers.running} running, ${workers.draining} draining, ${workers.gone} gone.`);
  lines.push(`Retention: ${retention.enabled ? `enabled, ${retention.lagMs === null ? 'not run yet' : `${retention.lagMs} ms behind`}` : 'disabled'}.`);
  if (report.missingPartitions.length > 0) lines.push(`Missing partitions: ${report.missingPartitions.join(', ')}.`);
  return lines.join('\n');
}

function isErrorEnvelope(value: unknown): value is ErrorEnvelope {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { name, message } = value as { name?: unknown; message?: unknown };
  return typeof name === 'string' && typeof message === 'string';
}

function detailValue(value: unknown): string {
  if (isErrorEnvelope(value)) return JSON.stringify(oneLine(formatError(value)));
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  return formatJson(value);
}

/**
 * An entry's data as `key=value` pairs on one line. Errors show as `name: message` (the stack
 * is in `jobs get` and `--json`); an attempt shows its duration instead of two timestamps.
 */
function entryDetails(entry: TimelineEntry): string {
  const data: Record<string, unknown> = { ...entry.data };
  if (entry.source === 'attempt' && typeof data.startedAt === 'string' && typeof data.finishedAt === 'string') {
    const ms = Date.parse(data.finishedAt) - Date.parse(data.startedAt);
    delete data.startedAt;
    delete data.finishedAt;
    if (Number.isFinite(ms)) data.took = `${ms}ms`;
  }
  return Object.entries(data)
    .filter(([, value]) => value !== null && value !== undefined)
    .map(([key, value]) => `${key}=${detailValue(value)}`)
    .join(' ');
}

/** A job's history as a table: lifecycle events and, marked `attempt`, closed attempts. */
export function formatTimeline(entries: readonly TimelineEntry[]): string {
  return formatTable(
    ['AT', 'WHAT', 'ATTEMPT', 'WORKER', 'FENCE', 'DETAILS'],
    entries.map((entry) => [
      formatDate(entry.at),
      entry.source === 'attempt' ? `attempt ${entry.kind}` : entry.kind,
      entry.attempt === null ? NONE : String(entry.attempt),
      entry.workerId ?? NONE,
      entry.fenceToken ?? NONE,
      [entryDetails(entry), shownLoginRole(entry) === null ? '' : `loginRole=${printable(shownLoginRole(entry) ?? '')}`].filter(Boolean).join(' '),
    ]),
  );
}
