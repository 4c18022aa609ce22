/**
 * The crash soak: N jobs through worker processes that die all the time, then an accounting of
 * every job, attempt, event and side effect.
 *
 *   npm run soak -- --jobs 20000 [--workers 3] [--kill-every-ms 5000] [...]   (see --help)
 *
 * The driver enqueues N jobs (soak/handler.ts: a checkpointed stage writing a side-effect row
 * and sleeping a tiny random delay, every 20th job failing once), starts worker child processes
 * (soak/worker.ts) with every failpoint of lib/core/failpoints.ts armed at a low probability,
 * and SIGKILLs a random worker at random intervals besides; every worker that dies is started
 * again at once, under a new worker id. When no job is live any more it stops the workers
 * (SIGTERM, so the survivors drain and report what they lost), reads the database and checks
 * that the numbers add up (see `account`). test/reliability/soak.test.ts runs it under Jest.
 *
 * Its database: a fresh one on the server of `--database-url`, DATABASE_URL or
 * WORKHORSE_TEST_DATABASE_URL (a role that may CREATE DATABASE), dropped afterwards; with none
 * of them, an embedded PostgreSQL server of its own (startEmbeddedPostgres of lib/testing). The
 * children run JavaScript transpiled once into a temporary directory, so that a restart costs a
 * node start-up and not a TypeScript compilation: restarts are the point of the exercise.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Pool, type PoolClient } from 'pg';
import * as ts from 'typescript';
import { installSchema, Queue, type EnqueueRequest } from '../../../lib/core';
import { TEST_SERVER_OPTIONS } from '../../support/test-server';
import { delay } from '../../support/wait';
import { SOAK_TABLES_SQL, SOAK_TYPE, type SoakPayload } from './handler';

const ROOT = join(__dirname, '..', '..', '..');
const POINTS = ['after-claim', 'before-handler', 'inside-handler', 'after-handler', 'before-complete', 'after-complete'];
const SOAK_QUEUE = 'soak';

export interface SoakOptions {
  /** A database with the workhorse schema installed and nothing else in it. */
  url: string;
  jobs: number;
  /** Worker processes alive at any time, default 3. */
  workers?: number;
  /** Handlers per worker, default 10. */
  concurrency?: number;
  /** Lease of every worker, default 3000 ms (a killed worker's jobs wait that long). */
  leaseMs?: number;
  /** Mean interval between the driver's own kills (uniform in [0.5x, 1.5x]); 0: none. Default 5000. */
  killEveryMs?: number;
  /** Probability of each failpoint each time a worker passes it, default 0.0002. */
  failpointProbability?: number;
  /** Every k-th job fails its first attempt that gets to the end, default 20; 0: none. */
  failOnceEvery?: number;
  /** Checkpointed stages per job, 1 or 2, default 1. */
  stages?: 1 | 2;
  /** Each executed stage sleeps a random 0..maxDelayMs, default 3. */
  maxDelayMs?: number;
  /** Give up (and report the jobs still live) after this long, default 15 minutes. */
  deadlineMs?: number;
  /** Progress lines; default silent. */
  log?: (line: string) => void;
}

export interface SoakReport {
  config: Required<Omit<SoakOptions, 'url' | 'log'>>;
  timing: { enqueueMs: number; runMs: number; stopMs: number; accountingMs: number; totalMs: number };
  jobs: { committed: number; succeeded: number; failed: number; canceled: number; live: number; notExactlyOneOutcome: number; splitViolations: number };
  handler: { runs: number; reruns: number; jobsRunMoreThanOnce: number; attemptsRunTwice: number };
  stages: { executions: number; reexecutions: number; executedAfterTheirCheckpoint: number; resultsNotFromTheCheckpoint: number };
  attempts: { total: number; succeeded: number; expired: number; failed: number; other: number; expiredFromKilledWorkers: number; expiredFromLiveWorkers: number };
  plannedFailures: { jobs: number; failedAttempts: number; jobsFailedTwice: number; unplannedFailures: number };
  staleWrites: { leaseLostEvents: number; withoutExpiredAttempt: number; survivorsUnreported: number };
  kills: { byDriver: number; byFailpoint: number; workerStarts: number; unexpectedExits: number; medianStartupMs: number; medianStartupCpuMs: number };
  consistency: {
    attemptNumbersNot1ToFinal: number;
    successNotTheFinalAttempt: number;
    claimedEventsNotOnePerAttempt: number;
    succeededEventsNotOne: number;
    expiredEventsMismatch: number;
    retryEventsMismatch: number;
    claimNotMatchingAttempt: number;
    fencesNotIncreasing: number;
  };
  workerErrors: { count: number; samples: string[] };
  /** Every check that failed, in words; empty when the soak passed. */
  violations: string[];
}

// ---- children -----------------------------------------------------------------------------------

function listTs(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) return listTs(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/**
 * lib/core and the soak fixtures as JavaScript in a temporary directory laid out like the
 * checkout (so relative imports hold), with node_modules linked in. The same transpilation as
 * test/support/ts-register.js, done once.
 */
function transpileChildren(): { worker: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'workhorse-soak-'));
  const compilerOptions: ts.CompilerOptions = {
    module: ts.ModuleKind.CommonJS,
    target: ts.ScriptTarget.ES2022,
    esModuleInterop: true,
    sourceMap: false,
  };
  const sources = [...listTs(join(ROOT, 'lib', 'core')), join(__dirname, 'handler.ts'), join(__dirname, 'worker.ts')];
  for (const file of sources) {
    const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), { compilerOptions, fileName: file });
    const target = join(dir, relative(ROOT, file).replace(/\.ts$/, '.js'));
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, outputText);
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  // lib/core/limits.ts reads the protocol's limits from sdk/protocol/limits.json.
  mkdirSync(join(dir, 'sdk'));
  symlinkSync(join(ROOT, 'sdk', 'protocol'), join(dir, 'sdk', 'protocol'));
  return {
    worker: join(dir, relative(ROOT, join(__dirname, 'worker.js'))),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

type Fate = 'running' | 'killed-by-driver' | 'killed-by-failpoint' | 'stopped' | 'unexpected';

interface WorkerProcess {
  id: string;
  child: ChildProcess;
  ready: boolean;
  spawnedAt: number;
  /** Milliseconds from spawn to the worker's READY line. */
  startupMs: number | null;
  /** CPU milliseconds the worker had used when it became ready. */
  startupCpuMs: number | null;
  fate: Fate;
  exited: Promise<void>;
}

// ---- the run ------------------------------------------------------------------------------------

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const config: SoakReport['config'] = {
    jobs: options.jobs,
    workers: options.workers ?? 3,
    concurrency: options.concurrency ?? 10,
    leaseMs: options.leaseMs ?? 3000,
    killEveryMs: options.killEveryMs ?? 5000,
    failpointProbability: options.failpointProbability ?? 0.0002,
    failOnceEvery: options.failOnceEvery ?? 20,
    stages: options.stages ?? 1,
    maxDelayMs: options.maxDelayMs ?? 3,
    deadlineMs: options.deadlineMs ?? 15 * 60_000,
  };
  if (!Number.isInteger(config.jobs) || config.jobs < 1) throw new Error(`jobs must be a positive integer, got ${config.jobs}`);
  if (!Number.isInteger(config.workers) || config.workers < 1) throw new Error(`workers must be a positive integer, got ${config.workers}`);
  const log = options.log ?? (() => undefined);
  const violations: string[] = [];
  const started = Date.now();

  const processes: WorkerProcess[] = [];
  const leaseLost: { workerId: string; jobId: string; attempt: number }[] = [];
  const workerErrors: string[] = [];
  let workerStarts = 0;
  let stopping = false;
  let killTimer: NodeJS.Timeout | null = null;

  const failpoints = POINTS.map((p) => `${p}:${config.failpointProbability}`).join(',');
  const children = transpileChildren();
  const pool = new Pool({ connectionString: options.url, max: 4 });
  pool.on('error', () => undefined);

  function startWorker(slot: number): void {
    workerStarts++;
    const id = `soak-w${slot}-${workerStarts}`;
    const child = spawn(process.execPath, [children.worker], {
      env: {
        ...process.env,
        SOAK_DATABASE_URL: options.url,
        SOAK_WORKER_ID: id,
        SOAK_QUEUES: SOAK_QUEUE,
        SOAK_CONCURRENCY: String(config.concurrency),
        SOAK_LEASE_MS: String(config.leaseMs),
        WORKHORSE_FAILPOINTS: config.failpointProbability > 0 ? failpoints : '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.on('error', (error) => violations.push(`worker ${id}: ${error.message}`));
    const proc: WorkerProcess = { id, child, ready: false, spawnedAt: Date.now(), startupMs: null, startupCpuMs: null, fate: 'running', exited: Promise.resolve() };
    proc.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        if (proc.fate === 'killed-by-driver') {
          // as planned
        } else if (signal === 'SIGKILL') {
          proc.fate = 'killed-by-failpoint';
        } else if (stopping && (code === 0 || signal === 'SIGTERM')) {
          proc.fate = 'stopped';
        } else {
          proc.fate = 'unexpected';
          violations.push(`worker ${id} exited unexpectedly (code ${code}, signal ${signal})`);
        }
        if (!stopping) startWorker(slot);
        resolve();
      });
    });
    if (child.stdout) {
      createInterface({ input: child.stdout }).on('line', (line) => {
        const [word, ...args] = line.split(' ');
        if (word === 'READY') {
          // READY <pid> <CPU µs>
          proc.ready = true;
          proc.startupMs = Date.now() - proc.spawnedAt;
          proc.startupCpuMs = Math.round(Number(args[1]) / 1000);
        } else if (word === 'LEASE_LOST') {
          // LEASE_LOST <job id> <attempt>
          leaseLost.push({ workerId: id, jobId: args[0], attempt: Number(args[1]) });
        } else if (word === 'STOPPED') {
          // STOPPED <user µs> <system µs>
          log(`${id} stopped after ${Math.round((Number(args[0]) + Number(args[1])) / 1000)} ms of CPU`);
        }
      });
    }
    if (child.stderr) {
      createInterface({ input: child.stderr }).on('line', (line) => {
        if (line.trim() !== '') workerErrors.push(`${id}: ${line}`);
      });
    }
    processes.push(proc);
  }

  function scheduleKill(): void {
    if (config.killEveryMs <= 0 || stopping) return;
    killTimer = setTimeout(() => {
      killTimer = null;
      const candidates = processes.filter((p) => p.fate === 'running' && p.ready);
      if (candidates.length > 0) {
        const victim = candidates[Math.floor(Math.random() * candidates.length)];
        victim.fate = 'killed-by-driver';
        victim.child.kill('SIGKILL');
      }
      scheduleKill();
    }, config.killEveryMs * (0.5 + Math.random()));
  }

  const count = async (text: string, values: unknown[] = []): Promise<number> =>
    Number(((await pool.query(text, values)).rows[0] as { n: string | number }).n);

  /** Starts the workers, kills at random, and returns once no job is live (or the deadline passed). */
  async function driveUntilDone(): Promise<void> {
    const runStarted = Date.now();
    for (let slot = 0; slot < config.workers; slot++) startWorker(slot);
    scheduleKill();
    let lastLog = Date.now();
    for (;;) {
      const live = await count('SELECT count(*) AS n FROM workhorse.job_runtime');
      if (live === 0) return;
      if (Date.now() - runStarted > config.deadlineMs) {
        violations.push(`deadline of ${config.deadlineMs} ms passed with ${live} jobs still live`);
        return;
      }
      if (Date.now() - lastLog >= 5000) {
        lastLog = Date.now();
        const kills = processes.filter((p) => p.fate.startsWith('killed')).length;
        const ready = processes.filter((p) => p.fate === 'running' && p.ready).length;
        log(
          `${((Date.now() - runStarted) / 1000).toFixed(0)} s: ${config.jobs - live} of ${config.jobs} jobs ended, ` +
            `${kills} workers killed, ${ready} of ${config.workers} ready`,
        );
      }
      await delay(500);
    }
  }

  /** SIGTERM for every live worker (the survivors drain and report what they lost). */
  async function stopWorkers(): Promise<void> {
    stopping = true;
    if (killTimer) clearTimeout(killTimer);
    for (const p of processes) if (p.fate === 'running') p.child.kill('SIGTERM');
    // A worker that does not drain in time is a finding too; it must not outlive the run.
    let drainTimer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      Promise.all(processes.map((p) => p.exited)).then(() => true),
      new Promise<boolean>((resolve) => {
        drainTimer = setTimeout(() => resolve(false), 60_000);
      }),
    ]);
    clearTimeout(drainTimer);
    if (drained) return;
    for (const p of processes) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        violations.push(`worker ${p.id} did not stop within 60 s of SIGTERM`);
        p.child.kill('SIGKILL');
      }
    }
    await Promise.all(processes.map((p) => p.exited));
  }

  const timed = async (work: () => Promise<void>): Promise<number> => {
    const at = Date.now();
    await work();
    return Date.now() - at;
  };

  try {
    await pool.query(SOAK_TABLES_SQL);
    const enqueueMs = await timed(() => enqueueJobs(pool, config));
    log(`enqueued ${config.jobs} jobs in ${(enqueueMs / 1000).toFixed(1)} s`);
    let runMs = 0;
    let stopMs = 0;
    try {
      runMs = await timed(driveUntilDone);
      const cpu = process.cpuUsage();
      log(`no job live after ${(runMs / 1000).toFixed(1)} s (driver CPU so far ${Math.round((cpu.user + cpu.system) / 1000)} ms); stopping the workers`);
    } finally {
      stopMs = await timed(stopWorkers);
    }
    const accountingStarted = Date.now();
    const report = await account(pool, config, processes, leaseLost, workerErrors, violations);
    report.timing = { enqueueMs, runMs, stopMs, accountingMs: Date.now() - accountingStarted, totalMs: Date.now() - started };
    return report;
  } finally {
    children.remove();
    await pool.end();
  }
}

async function enqueueJobs(pool: Pool, config: SoakReport['config']): Promise<void> {
  const queue = new Queue(pool);
  for (let from = 0; from < config.jobs; from += 1000) {
    const batch: EnqueueRequest[] = [];
    for (let n = from + 1; n <= Math.min(config.jobs, from + 1000); n++) {
      const payload: SoakPayload = { n, stages: config.stages, maxDelayMs: config.maxDelayMs };
      if (config.failOnceEvery > 0 && n % config.failOnceEvery === 0) payload.failOnce = true;
      batch.push({ type: SOAK_TYPE, payload, queue: SOAK_QUEUE, retryPolicy: { kind: 'fixed', delayMs: 100 } });
    }
    await queue.enqueueMany(batch);
  }
}

function median(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

// ---- the accounting -----------------------------------------------------------------------------

/**
 * Reads the whole run back and checks it. The definitions:
 *
 * - Every committed job ends with exactly one outcome, `succeeded` (no job runs out of its 25
 *   attempts here), and none is left live; the split invariant holds for every job.
 * - Attempts: a job that ended at attempt F has exactly one attempt_history row for each of
 *   1..F; attempt F is the `succeeded` one (with the outcome's fence), every earlier one is
 *   `expired` (its worker died or lost the lease) or `failed` (the planned failure). It has one
 *   `claimed` event per attempt (same worker and fence as that attempt's row), exactly one
 *   `succeeded` event, one `lease_expired` event per expired attempt and one `retry_scheduled`
 *   event per failed one; fences grow with the attempt number.
 * - Handler runs: at most one per attempt; runs minus jobs are the re-runs.
 * - Stages: a stage never executes in an attempt after the one that stored its checkpoint
 *   (replayed, not re-run), and every result carries exactly the checkpointed stage values, which
 *   came from a recorded execution. Executions beyond one per stage and job are the
 *   crashes between a side effect and its checkpoint: at-least-once, as documented.
 * - Planned failures: only jobs that asked for one fail, at most once each.
 * - Stale writes: every `job.lease_lost` a worker reported names an attempt that was closed as
 *   `expired`, and every attempt lost by a worker that survived to the end was reported by it.
 */
export async function account(
  pool: Pool | PoolClient,
  config: SoakReport['config'],
  processes: readonly Pick<WorkerProcess, 'id' | 'fate' | 'startupMs' | 'startupCpuMs'>[],
  leaseLost: { workerId: string; jobId: string; attempt: number }[],
  workerErrors: string[],
  violations: string[],
): Promise<SoakReport> {
  const one = async <R>(text: string, values: unknown[] = []): Promise<R> => (await pool.query(text, values)).rows[0] as R;
  const num = (value: string | number | null | undefined): number => Number(value ?? 0);

  const jobs = await one<Record<string, string>>(`
    SELECT (SELECT count(*) FROM workhorse.job) AS committed,
           (SELECT count(*) FROM workhorse.job_outcome WHERE state = 'succeeded') AS succeeded,
           (SELECT count(*) FROM workhorse.job_outcome WHERE state = 'failed') AS failed,
           (SELECT count(*) FROM workhorse.job_outcome WHERE state = 'canceled') AS canceled,
           (SELECT count(*) FROM workhorse.job_runtime) AS live,
           (SELECT count(*) FROM (SELECT j.id FROM workhorse.job j LEFT JOIN workhorse.job_outcome o ON o.job_id = j.id
                                  GROUP BY j.id HAVING count(o.job_id) <> 1) x) AS not_one,
           (SELECT count(*) FROM workhorse.job j
              LEFT JOIN workhorse.job_runtime r ON r.job_id = j.id
              LEFT JOIN workhorse.job_outcome o ON o.job_id = j.id
             WHERE (r.job_id IS NULL) = (o.job_id IS NULL)) AS split`);

  const attempts = await one<Record<string, string>>(`
    SELECT count(*) AS total,
           count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE outcome = 'expired') AS expired,
           count(*) FILTER (WHERE outcome = 'failed') AS failed,
           count(*) FILTER (WHERE outcome NOT IN ('succeeded', 'expired', 'failed')) AS other
    FROM workhorse.attempt_history`);

  const consistency = await one<Record<string, string>>(`
    WITH a AS (
      SELECT job_id, count(*) AS n, count(DISTINCT attempt) AS distinct_attempts, min(attempt) AS lo, max(attempt) AS hi,
             count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded,
             max(attempt) FILTER (WHERE outcome = 'succeeded') AS succeeded_attempt,
             max(fence_token) FILTER (WHERE outcome = 'succeeded') AS succeeded_fence,
             count(*) FILTER (WHERE outcome = 'expired') AS expired,
             count(*) FILTER (WHERE outcome = 'failed') AS failed
      FROM workhorse.attempt_history GROUP BY job_id),
    e AS (
      SELECT job_id,
             count(*) FILTER (WHERE kind = 'claimed') AS claimed,
             count(DISTINCT attempt) FILTER (WHERE kind = 'claimed') AS claimed_attempts,
             max(attempt) FILTER (WHERE kind = 'claimed') AS claimed_hi,
             count(*) FILTER (WHERE kind = 'succeeded') AS succeeded,
             count(*) FILTER (WHERE kind = 'lease_expired') AS lease_expired,
             count(*) FILTER (WHERE kind = 'retry_scheduled') AS retry_scheduled
      FROM workhorse.job_event GROUP BY job_id)
    SELECT
      count(*) FILTER (WHERE a.job_id IS NULL OR a.n <> o.final_attempt OR a.distinct_attempts <> a.n
                             OR a.lo <> 1 OR a.hi <> o.final_attempt) AS attempt_numbers,
      count(*) FILTER (WHERE o.state = 'succeeded' AND (a.succeeded IS DISTINCT FROM 1
                             OR a.succeeded_attempt IS DISTINCT FROM o.final_attempt
                             OR a.succeeded_fence IS DISTINCT FROM o.fence_token)) AS success_attempt,
      count(*) FILTER (WHERE e.claimed IS DISTINCT FROM o.final_attempt::bigint
                             OR e.claimed_attempts IS DISTINCT FROM o.final_attempt::bigint
                             OR e.claimed_hi IS DISTINCT FROM o.final_attempt) AS claimed_events,
      count(*) FILTER (WHERE o.state = 'succeeded' AND e.succeeded IS DISTINCT FROM 1) AS succeeded_events,
      count(*) FILTER (WHERE coalesce(e.lease_expired, 0) <> coalesce(a.expired, 0)) AS expired_events,
      count(*) FILTER (WHERE coalesce(e.retry_scheduled, 0) <> coalesce(a.failed, 0)) AS retry_events
    FROM workhorse.job_outcome o LEFT JOIN a ON a.job_id = o.job_id LEFT JOIN e ON e.job_id = o.job_id`);

  const claimMismatch = await one<{ n: string }>(`
    SELECT count(*) AS n
    FROM workhorse.job_event e
    LEFT JOIN workhorse.attempt_history a ON a.job_id = e.job_id AND a.attempt = e.attempt
    WHERE e.kind = 'claimed'
      AND (a.job_id IS NULL OR a.fence_token IS DISTINCT FROM e.fence_token OR a.worker_id IS DISTINCT FROM e.worker_id)`);

  const fences = await one<{ n: string }>(`
    SELECT count(*) AS n FROM (
      SELECT fence_token, lag(fence_token) OVER (PARTITION BY job_id ORDER BY attempt) AS previous
      FROM workhorse.attempt_history) x
    WHERE fence_token <= previous`);

  const handler = await one<Record<string, string>>(`
    SELECT (SELECT count(*) FROM public.soak_handler_run) AS runs,
           (SELECT count(*) FROM (SELECT job_id FROM public.soak_handler_run GROUP BY job_id HAVING count(*) > 1) x) AS rerun_jobs,
           (SELECT count(*) FROM (SELECT 1 FROM public.soak_handler_run GROUP BY job_id, attempt HAVING count(*) > 1) x) AS twice`);

  // Set-based (hash joins), so that it stays linear in the number of jobs on every planner.
  const stages = await one<Record<string, string>>(`
    WITH o AS (
      SELECT o.job_id, o.result, o.final_attempt, coalesce((j.payload ->> 'stages')::integer, 2) AS planned
      FROM workhorse.job_outcome o JOIN workhorse.job j ON j.id = o.job_id
      WHERE o.state = 'succeeded'),
    k AS (SELECT job_id, name, value FROM workhorse.job_checkpoint WHERE name LIKE 'stage-%'),
    r AS (SELECT o.job_id, s.key AS name, s.value FROM o CROSS JOIN LATERAL jsonb_each(o.result -> 'stages') AS s),
    bad AS (
      -- the result's attempt, and its number of stages
      SELECT o.job_id FROM o
       WHERE (o.result ->> 'attempt')::integer IS DISTINCT FROM o.final_attempt
          OR (SELECT count(*) FROM jsonb_object_keys(o.result -> 'stages')) <> o.planned
      UNION
      -- every stage has its checkpoint
      SELECT o.job_id FROM o LEFT JOIN (SELECT job_id, count(*) AS n FROM k GROUP BY job_id) kc ON kc.job_id = o.job_id
       WHERE coalesce(kc.n, 0) <> o.planned
      UNION
      -- the result carries each stored value
      SELECT k.job_id FROM k JOIN o ON o.job_id = k.job_id WHERE o.result -> 'stages' -> k.name IS DISTINCT FROM k.value
      UNION
      -- each value came from a recorded execution of that job's stage
      SELECT r.job_id FROM r
        LEFT JOIN public.soak_side_effect e ON e.token = (r.value ->> 'token')::uuid AND e.job_id = r.job_id AND e.stage = r.name
       WHERE e.id IS NULL)
    SELECT (SELECT count(*) FROM public.soak_side_effect) AS executions,
           (SELECT sum(coalesce((payload ->> 'stages')::integer, 2)) FROM workhorse.job) AS planned,
           (SELECT count(*) FROM public.soak_side_effect e
              JOIN workhorse.job_checkpoint k ON k.job_id = e.job_id AND k.name = e.stage
             WHERE e.attempt > k.attempt) AS after_checkpoint,
           (SELECT count(*) FROM bad) AS not_replayed`);

  const planned = await one<Record<string, string>>(`
    WITH f AS (SELECT job_id, count(*) AS n FROM workhorse.attempt_history WHERE outcome = 'failed' GROUP BY job_id)
    SELECT (SELECT count(*) FROM workhorse.job WHERE payload ? 'failOnce') AS jobs,
           (SELECT count(*) FROM f WHERE n > 1) AS twice,
           (SELECT count(*) FROM f JOIN workhorse.job j ON j.id = f.job_id WHERE NOT j.payload ? 'failOnce') AS unplanned`);

  const expiredBy = (await pool.query<{ worker_id: string; n: string }>(
    "SELECT worker_id, count(*) AS n FROM workhorse.attempt_history WHERE outcome = 'expired' GROUP BY worker_id",
  )).rows;
  const fateOf = new Map(processes.map((p) => [p.id, p.fate]));
  const killed = (id: string) => (fateOf.get(id) ?? '').startsWith('killed');
  const expiredFromKilledWorkers = expiredBy.filter((r) => killed(r.worker_id)).reduce((s, r) => s + num(r.n), 0);
  const expiredFromLiveWorkers = expiredBy.filter((r) => !killed(r.worker_id)).reduce((s, r) => s + num(r.n), 0);

  // Every reported loss is an attempt the database closed as expired.
  const lostReports = JSON.stringify(leaseLost.map((l) => ({ jobId: l.jobId, attempt: l.attempt, workerId: l.workerId })));
  const withoutExpired = await one<{ n: string }>(
    `SELECT count(*) AS n FROM jsonb_to_recordset($1::jsonb) AS l ("jobId" uuid, attempt integer, "workerId" text)
      WHERE NOT EXISTS (SELECT 1 FROM workhorse.attempt_history a
                         WHERE a.job_id = l."jobId" AND a.attempt = l.attempt AND a.worker_id = l."workerId" AND a.outcome = 'expired')`,
    [lostReports],
  );
  // A worker that lived to the clean stop learned of every attempt it lost, and said so.
  const survivors = processes.filter((p) => p.fate === 'stopped').map((p) => p.id);
  const unreported = await one<{ n: string }>(
    `SELECT count(*) AS n FROM workhorse.attempt_history a
      WHERE a.outcome = 'expired' AND a.worker_id = ANY ($1::text[])
        AND NOT EXISTS (SELECT 1 FROM jsonb_to_recordset($2::jsonb) AS l ("jobId" uuid, attempt integer, "workerId" text)
                         WHERE l."jobId" = a.job_id AND l.attempt = a.attempt AND l."workerId" = a.worker_id)`,
    [survivors, lostReports],
  );

  const report: SoakReport = {
    config,
    timing: { enqueueMs: 0, runMs: 0, stopMs: 0, accountingMs: 0, totalMs: 0 },
    jobs: {
      committed: num(jobs.committed),
      succeeded: num(jobs.succeeded),
      failed: num(jobs.failed),
      canceled: num(jobs.canceled),
      live: num(jobs.live),
      notExactlyOneOutcome: num(jobs.not_one),
      splitViolations: num(jobs.split),
    },
    handler: {
      runs: num(handler.runs),
      reruns: num(handler.runs) - num(jobs.committed),
      jobsRunMoreThanOnce: num(handler.rerun_jobs),
      attemptsRunTwice: num(handler.twice),
    },
    stages: {
      executions: num(stages.executions),
      reexecutions: num(stages.executions) - num(stages.planned),
      executedAfterTheirCheckpoint: num(stages.after_checkpoint),
      resultsNotFromTheCheckpoint: num(stages.not_replayed),
    },
    attempts: {
      total: num(attempts.total),
      succeeded: num(attempts.succeeded),
      expired: num(attempts.expired),
      failed: num(attempts.failed),
      other: num(attempts.other),
      expiredFromKilledWorkers,
      expiredFromLiveWorkers,
    },
    plannedFailures: {
      jobs: num(planned.jobs),
      failedAttempts: num(attempts.failed),
      jobsFailedTwice: num(planned.twice),
      unplannedFailures: num(planned.unplanned),
    },
    staleWrites: {
      leaseLostEvents: leaseLost.length,
      withoutExpiredAttempt: num(withoutExpired.n),
      survivorsUnreported: num(unreported.n),
    },
    kills: {
      byDriver: processes.filter((p) => p.fate === 'killed-by-driver').length,
      byFailpoint: processes.filter((p) => p.fate === 'killed-by-failpoint').length,
      workerStarts: processes.length,
      unexpectedExits: processes.filter((p) => p.fate === 'unexpected').length,
      medianStartupMs: median(processes.flatMap((p) => (p.startupMs === null ? [] : [p.startupMs]))),
      medianStartupCpuMs: median(processes.flatMap((p) => (p.startupCpuMs === null ? [] : [p.startupCpuMs]))),
    },
    consistency: {
      attemptNumbersNot1ToFinal: num(consistency.attempt_numbers),
      successNotTheFinalAttempt: num(consistency.success_attempt),
      claimedEventsNotOnePerAttempt: num(consistency.claimed_events),
      succeededEventsNotOne: num(consistency.succeeded_events),
      expiredEventsMismatch: num(consistency.expired_events),
      retryEventsMismatch: num(consistency.retry_events),
      claimNotMatchingAttempt: num(claimMismatch.n),
      fencesNotIncreasing: num(fences.n),
    },
    workerErrors: { count: workerErrors.length, samples: workerErrors.slice(0, 10) },
    violations,
  };

  const must = (ok: boolean, what: string) => {
    if (!ok) violations.push(what);
  };
  const r = report;
  must(r.jobs.committed === config.jobs, `committed jobs ${r.jobs.committed} != enqueued ${config.jobs}`);
  must(r.jobs.succeeded === r.jobs.committed, `succeeded outcomes ${r.jobs.succeeded} != committed jobs ${r.jobs.committed}`);
  must(r.jobs.live === 0, `${r.jobs.live} jobs left live`);
  must(r.jobs.notExactlyOneOutcome === 0, `${r.jobs.notExactlyOneOutcome} jobs without exactly one outcome`);
  must(r.jobs.splitViolations === 0, `${r.jobs.splitViolations} jobs break the split invariant`);
  must(r.handler.attemptsRunTwice === 0, `${r.handler.attemptsRunTwice} attempts ran the handler more than once`);
  must(r.stages.executedAfterTheirCheckpoint === 0, `${r.stages.executedAfterTheirCheckpoint} stage executions after their checkpoint was stored`);
  must(r.stages.resultsNotFromTheCheckpoint === 0, `${r.stages.resultsNotFromTheCheckpoint} results not made of the stored checkpoints`);
  must(r.attempts.total === r.attempts.succeeded + r.attempts.expired + r.attempts.failed, `${r.attempts.other} attempts closed otherwise than succeeded/expired/failed`);
  must(r.attempts.succeeded === r.jobs.succeeded, `succeeded attempts ${r.attempts.succeeded} != succeeded outcomes ${r.jobs.succeeded}`);
  must(r.plannedFailures.failedAttempts <= r.plannedFailures.jobs, `${r.plannedFailures.failedAttempts} failed attempts for ${r.plannedFailures.jobs} planned failures`);
  must(r.plannedFailures.jobsFailedTwice === 0, `${r.plannedFailures.jobsFailedTwice} jobs failed more than once`);
  must(r.plannedFailures.unplannedFailures === 0, `${r.plannedFailures.unplannedFailures} jobs failed without a planned failure`);
  must(r.staleWrites.withoutExpiredAttempt === 0, `${r.staleWrites.withoutExpiredAttempt} reported lease losses name no expired attempt`);
  must(r.staleWrites.survivorsUnreported === 0, `${r.staleWrites.survivorsUnreported} attempts lost by surviving workers were not reported by them`);
  for (const [key, value] of Object.entries(r.consistency)) must(value === 0, `consistency: ${key} = ${value}`);
  return report;
}

// ---- printing -----------------------------------------------------------------------------------

export function formatReport(r: SoakReport): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const c = r.config;
  const rows: [string, number | string, string?][] = [
    ['committed jobs', r.jobs.committed],
    ['succeeded outcomes', r.jobs.succeeded, 'must equal committed jobs'],
    ['failed / canceled outcomes', `${r.jobs.failed} / ${r.jobs.canceled}`, 'must be 0 / 0'],
    ['jobs left live', r.jobs.live, 'must be 0'],
    ['jobs with != 1 outcome', r.jobs.notExactlyOneOutcome, 'must be 0'],
    ['split invariant violations', r.jobs.splitViolations, 'must be 0'],
    ['handler runs', r.handler.runs, `${r.handler.reruns} re-runs, over ${r.handler.jobsRunMoreThanOnce} jobs`],
    ['attempts that ran the handler twice', r.handler.attemptsRunTwice, 'must be 0'],
    ['stage executions', r.stages.executions, `${r.stages.reexecutions} beyond one per stage (crash between effect and checkpoint)`],
    ['stage executions after their checkpoint', r.stages.executedAfterTheirCheckpoint, 'must be 0'],
    ['results not made of the checkpoints', r.stages.resultsNotFromTheCheckpoint, 'must be 0'],
    ['attempts', r.attempts.total, `${r.attempts.succeeded} succeeded + ${r.attempts.expired} expired + ${r.attempts.failed} failed (other: ${r.attempts.other})`],
    ['expired attempts', r.attempts.expired, `${r.attempts.expiredFromKilledWorkers} of killed workers, ${r.attempts.expiredFromLiveWorkers} of live ones`],
    ['planned failures', r.plannedFailures.failedAttempts, `of ${r.plannedFailures.jobs} jobs planned to fail once; failed twice: ${r.plannedFailures.jobsFailedTwice}, unplanned: ${r.plannedFailures.unplannedFailures}`],
    ['rejected stale writes (job.lease_lost)', r.staleWrites.leaseLostEvents, `not an expired attempt: ${r.staleWrites.withoutExpiredAttempt}; survivors' losses unreported: ${r.staleWrites.survivorsUnreported}`],
    ['kills', r.kills.byDriver + r.kills.byFailpoint, `${r.kills.byDriver} by the driver, ${r.kills.byFailpoint} by failpoints; ${r.kills.workerStarts} worker starts (median ${r.kills.medianStartupMs} ms and ${r.kills.medianStartupCpuMs} ms of CPU to ready), ${r.kills.unexpectedExits} unexpected exits`],
    ...Object.entries(r.consistency).map(([key, value]): [string, number, string] => [`consistency: ${key}`, value, 'must be 0']),
    ['worker errors', r.workerErrors.count],
  ];
  const width = Math.max(...rows.map(([label]) => label.length)) + 2;
  const lines = [
    `soak: ${c.jobs} jobs, ${c.workers} workers x ${c.concurrency}, lease ${c.leaseMs} ms, ` +
      `driver kill every ~${c.killEveryMs} ms, failpoints p=${c.failpointProbability} each, ${c.stages} stage(s), 1 in ${c.failOnceEvery} jobs fails once`,
    `wall time ${s(r.timing.totalMs)}: enqueue ${s(r.timing.enqueueMs)}, run ${s(r.timing.runMs)} ` +
      `(${Math.round(r.jobs.succeeded / Math.max(r.timing.runMs / 1000, 0.001))} jobs/s), stop ${s(r.timing.stopMs)}, accounting ${s(r.timing.accountingMs)}`,
    ...rows.map(([label, value, note]) => `  ${label.padEnd(width, '.')} ${String(value).padStart(8)}${note ? `   ${note}` : ''}`),
    ...r.workerErrors.samples.map((line) => `  worker error: ${line}`),
    r.violations.length === 0 ? 'PASS: every check holds' : `FAIL:\n${r.violations.map((v) => `  - ${v}`).join('\n')}`,
  ];
  return lines.join('\n');
}

// ---- command line -------------------------------------------------------------------------------

const HELP = `Usage: npm run soak -- [options]

  --jobs N                    jobs to run (default 20000)
  --workers N                 worker processes (default 3)
  --concurrency N             handlers per worker (default 10)
  --lease-ms N                lease of every worker (default 3000)
  --kill-every-ms N           mean interval of the driver's SIGKILLs, 0 for none (default 5000)
  --failpoint-probability P   probability of each failpoint at each pass (default 0.0002)
  --fail-once-every K         every K-th job fails once, 0 for none (default 20)
  --stages 1|2                checkpointed stages per job (default 1)
  --deadline-ms N             give up after this long (default 900000)
  --database-url URL          server to create the soak's database on (also DATABASE_URL);
                              without one, an embedded PostgreSQL is started
  --json                      print the report as JSON after the table
`;

/** A bad command line: printed without a stack trace. */
class UsageError extends Error {}

async function withAdmin<T>(url: string, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function main(argv: string[]): Promise<number> {
  const options: Omit<SoakOptions, 'url'> = { jobs: 20_000 };
  let serverUrl = process.env.DATABASE_URL || process.env.WORKHORSE_TEST_DATABASE_URL || undefined;
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new UsageError(`${flag} needs a value`);
      return v;
    };
    const int = (): number => {
      const v = Number(value());
      if (!Number.isInteger(v) || v < 0) throw new UsageError(`${flag} needs a non-negative integer`);
      return v;
    };
    if (flag === '--jobs') options.jobs = int();
    else if (flag === '--workers') options.workers = int();
    else if (flag === '--concurrency') options.concurrency = int();
    else if (flag === '--lease-ms') options.leaseMs = int();
    else if (flag === '--kill-every-ms') options.killEveryMs = int();
    else if (flag === '--failpoint-probability') {
      const p = Number(value());
      if (!(p >= 0 && p <= 1)) throw new UsageError('--failpoint-probability needs a number from 0 to 1');
      options.failpointProbability = p;
    }
    else if (flag === '--fail-once-every') options.failOnceEvery = int();
    else if (flag === '--stages') {
      const v = int();
      if (v !== 1 && v !== 2) throw new UsageError('--stages must be 1 or 2');
      options.stages = v;
    }
    else if (flag === '--deadline-ms') options.deadlineMs = int();
    else if (flag === '--database-url') serverUrl = value();
    else if (flag === '--json') json = true;
    else if (flag === '--help' || flag === '-h') {
      process.stdout.write(HELP);
      return 0;
    } else throw new UsageError(`unknown option ${flag}\n\n${HELP}`);
  }
  const say = (line: string) => process.stderr.write(`soak: ${line}\n`);

  let stopServer = async (): Promise<void> => undefined;
  if (!serverUrl) {
    say('starting an embedded PostgreSQL server');
    const { startEmbeddedPostgres } = await import('../../../lib/testing/embedded-postgres');
    const server = await startEmbeddedPostgres(TEST_SERVER_OPTIONS);
    serverUrl = server.url;
    stopServer = () => server.stop();
  }
  const name = `wh_soak_${randomBytes(6).toString('hex')}`;
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  try {
    await withAdmin(serverUrl, (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
    try {
      const pool = new Pool({ connectionString: url.toString(), max: 2 });
      try {
        await installSchema(pool);
      } finally {
        await pool.end();
      }
      const report = await runSoak({ ...options, url: url.toString(), log: say });
      process.stdout.write(`${formatReport(report)}\n`);
      if (json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      return report.violations.length === 0 ? 0 : 1;
    } finally {
      await withAdmin(serverUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`));
    }
  } finally {
    await stopServer();
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      const text = error instanceof UsageError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error);
      process.stderr.write(`soak: ${text}\n`);
      process.exit(2);
    },
  );
}
