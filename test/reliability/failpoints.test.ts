/**
 * A worker process killed (SIGKILL, no cleanup) at each boundary of a job: right after the claim,
 * before the handler, between two checkpoints inside it, after it returned, before the completion
 * is sent and after the completion committed. Each time another worker must recover the job once
 * the lease has really run out, replay what was checkpointed, and end it with exactly one
 * success; a completion that had committed must stand, with no second run.
 *
 * The child dies by lib/core/failpoints.ts (WORKHORSE_FAILPOINTS="<point>:1"), so it dies the
 * first time it passes that point and nowhere else. This process never sets the variable: its
 * recovering workers run the same handlers (soak/handler.ts) without failpoints.
 *
 * The doomed children of all cases start in beforeAll (three at a time), each on a queue of its own, so
 * the file pays their start-up (TypeScript compiled on the fly) and their leases once, not per
 * case; each test then recovers and checks its own case.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { Worker } from '../../lib/core';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';
import { registerSoakHandlers, SOAK_TABLES_SQL, SOAK_TX_TYPE, SOAK_TYPE, type SoakResult } from './soak/handler';

const FIXTURE = join(__dirname, 'soak', 'worker.ts');
const REGISTER = require.resolve('../support/ts-register.js');
// Long enough that a child starved of CPU (nine of them start at once, compiling TypeScript, on
// as few as two cores) still renews its lease before it reaches its failpoint; a shorter one let
// a child lose its own first attempt and die in a second.
const LEASE_MS = 4000;

type Point = 'after-claim' | 'before-handler' | 'inside-handler' | 'after-handler' | 'before-complete' | 'after-complete';
type Stage = 'stage-1' | 'stage-2';

interface Case {
  name: string;
  point: Point;
  type: typeof SOAK_TYPE | typeof SOAK_TX_TYPE;
  /** Whether the killed attempt got as far as calling the handler. */
  firstRun: boolean;
  /** Stages whose rows and checkpoints had committed when the process died. */
  committedBeforeKill: Stage[];
  /** Whether the job's success had committed when the process died. */
  completed: boolean;
}

const CASES: Case[] = [
  { name: 'after-claim', point: 'after-claim', type: SOAK_TYPE, firstRun: false, committedBeforeKill: [], completed: false },
  { name: 'before-handler', point: 'before-handler', type: SOAK_TYPE, firstRun: false, committedBeforeKill: [], completed: false },
  { name: 'inside-handler', point: 'inside-handler', type: SOAK_TYPE, firstRun: true, committedBeforeKill: ['stage-1'], completed: false },
  { name: 'after-handler', point: 'after-handler', type: SOAK_TYPE, firstRun: true, committedBeforeKill: ['stage-1', 'stage-2'], completed: false },
  { name: 'before-complete', point: 'before-complete', type: SOAK_TYPE, firstRun: true, committedBeforeKill: ['stage-1', 'stage-2'], completed: false },
  { name: 'after-complete', point: 'after-complete', type: SOAK_TYPE, firstRun: true, committedBeforeKill: ['stage-1', 'stage-2'], completed: true },
  // A transactional handler's stage rows and checkpoints belong to the transaction that records
  // the success: before its commit a kill takes all of them away.
  { name: 'tx-inside-handler', point: 'inside-handler', type: SOAK_TX_TYPE, firstRun: true, committedBeforeKill: [], completed: false },
  { name: 'tx-before-complete', point: 'before-complete', type: SOAK_TX_TYPE, firstRun: true, committedBeforeKill: [], completed: false },
  { name: 'tx-after-complete', point: 'after-complete', type: SOAK_TX_TYPE, firstRun: true, committedBeforeKill: ['stage-1', 'stage-2'], completed: true },
];

interface JobRecord {
  outcomes: { state: string; final_attempt: number; worker_id: string; result: SoakResult | null }[];
  runtime: { state: string; current_attempt: number; worker_id: string | null }[];
  attempts: { attempt: number; outcome: string; worker_id: string }[];
  claims: { attempt: number; worker_id: string }[];
  succeededEvents: number;
  runs: { attempt: number; worker_id: string }[];
  effects: { stage: string; attempt: number; worker_id: string; token: string }[];
  checkpoints: { name: string; attempt: number; value: unknown }[];
}

interface Crash {
  jobId: string;
  queueName: string;
  doomed: string;
  exit: { code: number | null; signal: NodeJS.Signals | null };
  stderr: string;
  /** The job as the dead process left it, read as soon as it had exited. */
  atDeath: JobRecord;
}

const { db, pool, queue } = useTestDatabase({
  afterEachTest: () => Promise.all(workers.splice(0).map((w) => w.stop())),
  beforeDrop: async () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }
    }
    await Promise.all(workers.map((w) => w.stop()));
  },
});
const children: ChildProcessWithoutNullStreams[] = [];
const workers: Worker[] = [];
const crashes = new Map<string, Crash>();

beforeAll(async () => {
  // A failpoint variable in this process would make the recovering workers kill Jest.
  expect(process.env.WORKHORSE_FAILPOINTS).toBeUndefined();
  await pool.query(SOAK_TABLES_SQL);
  // Three children at a time: each compiles its TypeScript at start, and nine at once on a
  // loaded 2-core machine took longer than a child is given to reach its failpoint.
  for (let i = 0; i < CASES.length; i += 3) {
    await Promise.all(
      CASES.slice(i, i + 3).map(async (c) => {
        const queueName = `fp-${c.name}`;
        const doomed = `doomed-${c.name}`;
        const jobId = await queue.enqueue(c.type, { n: 1 }, { queue: queueName });
        const { exit, stderr } = await runDoomedChild(c.point, doomed, queueName);
        crashes.set(c.name, { jobId, queueName, doomed, exit, stderr, atDeath: await record(jobId) });
      }),
    );
  }
}, 600_000);

/** Starts a worker process that kills itself at `point`; resolves with how it exited. */
function runDoomedChild(
  point: Point,
  workerId: string,
  queueName: string,
): Promise<{ exit: { code: number | null; signal: NodeJS.Signals | null }; stderr: string }> {
  const child = spawn(process.execPath, ['-r', REGISTER, FIXTURE], {
    env: {
      ...process.env,
      SOAK_DATABASE_URL: db.url,
      SOAK_WORKER_ID: workerId,
      SOAK_QUEUES: queueName,
      SOAK_CONCURRENCY: '1',
      SOAK_LEASE_MS: String(LEASE_MS),
      SOAK_POLL_MS: '50',
      SOAK_TICK_MS: '100',
      WORKHORSE_FAILPOINTS: `${point}:1`,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.stdout.resume();
  return new Promise((resolve, reject) => {
    // A child that never reaches its failpoint would hang here; fail with what it said instead.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the worker process did not die at ${point} within 120 s; stderr: ${stderr}`));
    }, 120_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ exit: { code, signal }, stderr });
    });
  });
}

async function record(jobId: string): Promise<JobRecord> {
  const rows = async <R>(text: string): Promise<R[]> => (await pool.query(text, [jobId])).rows as R[];
  const [succeeded] = await rows<{ n: string }>(
    "SELECT count(*) AS n FROM workhorse.job_event WHERE job_id = $1 AND kind = 'succeeded'",
  );
  return {
    outcomes: await rows('SELECT state, final_attempt, worker_id, result FROM workhorse.job_outcome WHERE job_id = $1'),
    runtime: await rows('SELECT state, current_attempt, worker_id FROM workhorse.job_runtime WHERE job_id = $1'),
    attempts: await rows('SELECT attempt, outcome, worker_id FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id'),
    claims: await rows("SELECT attempt, worker_id FROM workhorse.job_event WHERE job_id = $1 AND kind = 'claimed' ORDER BY id"),
    succeededEvents: Number(succeeded.n),
    runs: await rows('SELECT attempt, worker_id FROM public.soak_handler_run WHERE job_id = $1 ORDER BY id'),
    effects: await rows('SELECT stage, attempt, worker_id, token FROM public.soak_side_effect WHERE job_id = $1 ORDER BY id'),
    checkpoints: await rows('SELECT name, attempt, value FROM workhorse.job_checkpoint WHERE job_id = $1 ORDER BY name'),
  };
}

function recoverer(workerId: string, queueName: string): Worker {
  const worker = registerSoakHandlers(
    new Worker(queue, { workerId, queues: [queueName], concurrency: 1, leaseMs: LEASE_MS, pollMs: 50, tickMs: 100 }),
    pool,
  );
  workers.push(worker);
  return worker;
}

function crashOf(c: Case): Crash {
  const crash = crashes.get(c.name);
  if (!crash) throw new Error(`no crash recorded for ${c.name}`);
  return crash;
}

/** What every case shares: the process died by SIGKILL at its point, with exactly this committed. */
function expectDiedAt(c: Case, crash: Crash): void {
  expect({ ...crash.exit, stderr: crash.stderr }).toEqual({ code: null, signal: 'SIGKILL', stderr: '' });
  const { atDeath, doomed } = crash;
  expect(atDeath.claims).toEqual([{ attempt: 1, worker_id: doomed }]);
  expect(atDeath.runs).toEqual(c.firstRun ? [{ attempt: 1, worker_id: doomed }] : []);
  expect(atDeath.checkpoints.map((k) => k.name)).toEqual(c.committedBeforeKill);
  expect(atDeath.effects.map((e) => e.stage)).toEqual(c.committedBeforeKill);
  if (c.completed) {
    expect(atDeath.outcomes).toEqual([expect.objectContaining({ state: 'succeeded', final_attempt: 1, worker_id: doomed })]);
  } else {
    // Still the dead worker's, unless some live worker's tick already found its lease expired.
    expect(atDeath.outcomes).toEqual([]);
    expect(atDeath.runtime).toHaveLength(1);
  }
}

const recovered = CASES.filter((c) => !c.completed);
const committed = CASES.filter((c) => c.completed);

describe('a worker process killed before the success committed', () => {
  it.each(recovered)('$name: recovered after the lease, checkpoints replayed, one success', async (c) => {
    const crash = crashOf(c);
    expectDiedAt(c, crash);
    const { jobId, doomed } = crash;
    const recoveredBy = `recoverer-${c.name}`;

    // Nothing forces the expiry: the lease runs out and a worker's tick takes the job back.
    const worker = recoverer(recoveredBy, crash.queueName);
    void worker.run();
    await waitFor(async () => (await record(jobId)).outcomes.length > 0, 30_000, `job ${jobId} to end`);

    const after = await record(jobId);
    expect(after.runtime).toEqual([]);
    expect(after.outcomes).toEqual([expect.objectContaining({ state: 'succeeded', final_attempt: 2, worker_id: recoveredBy })]);
    expect(after.succeededEvents).toBe(1);
    expect(after.attempts).toEqual([
      { attempt: 1, outcome: 'expired', worker_id: doomed },
      { attempt: 2, outcome: 'succeeded', worker_id: recoveredBy },
    ]);
    expect(after.claims).toEqual([
      { attempt: 1, worker_id: doomed },
      { attempt: 2, worker_id: recoveredBy },
    ]);
    // The attempt was closed no earlier than its lease allowed.
    const { rows: held } = await pool.query<{ ms: number }>(
      "SELECT extract(epoch FROM finished_at - started_at) * 1000 AS ms FROM workhorse.attempt_history WHERE job_id = $1 AND outcome = 'expired'",
      [jobId],
    );
    expect(Number(held[0].ms)).toBeGreaterThanOrEqual(LEASE_MS);
    expect(after.runs).toEqual([...(c.firstRun ? [{ attempt: 1, worker_id: doomed }] : []), { attempt: 2, worker_id: recoveredBy }]);

    // Each stage executed exactly once over both attempts: in the killed attempt if its
    // checkpoint committed there (the recovery replayed it), in the recovery otherwise.
    const attemptOf = (stage: Stage) => (c.committedBeforeKill.includes(stage) ? 1 : 2);
    const workerOf = (stage: Stage) => (attemptOf(stage) === 1 ? doomed : recoveredBy);
    expect(after.effects.map(({ stage, attempt, worker_id }) => ({ stage, attempt, worker_id }))).toEqual(
      (['stage-1', 'stage-2'] as const).map((stage) => ({ stage, attempt: attemptOf(stage), worker_id: workerOf(stage) })),
    );
    expect(after.checkpoints.map((k) => [k.name, k.attempt])).toEqual([
      ['stage-1', attemptOf('stage-1')],
      ['stage-2', attemptOf('stage-2')],
    ]);
    // The result carries the values of those single executions, replayed where they were stored.
    const token = (stage: Stage) => after.effects.find((e) => e.stage === stage)?.token;
    expect(after.outcomes[0].result).toEqual({
      n: 1,
      stages: {
        'stage-1': { token: token('stage-1'), attempt: attemptOf('stage-1') },
        'stage-2': { token: token('stage-2'), attempt: attemptOf('stage-2') },
      },
      attempt: 2,
    });
  });
});

describe('a worker process killed after the success committed', () => {
  it.each(committed)('$name: the success stands, and the job never runs again', async (c) => {
    const crash = crashOf(c);
    expectDiedAt(c, crash);
    const { jobId, doomed } = crash;

    // Past the dead worker's lease there is still nothing to recover or to run.
    await waitFor(
      async () => {
        const { rows } = await pool.query<{ past: boolean }>(
          `SELECT clock_timestamp() > started_at + $2 * interval '1 millisecond' AS past
             FROM workhorse.attempt_history WHERE job_id = $1`,
          [jobId, LEASE_MS],
        );
        return rows[0].past;
      },
      10_000,
      'the dead worker lease to run out',
    );
    expect(await recoverer(`recoverer-${c.name}`, crash.queueName).runOnce()).toBe(0);

    const after = await record(jobId);
    expect(after).toEqual(crash.atDeath);
    expect(after.runtime).toEqual([]);
    expect(after.succeededEvents).toBe(1);
    expect(after.attempts).toEqual([{ attempt: 1, outcome: 'succeeded', worker_id: doomed }]);
    expect(after.effects.map((e) => [e.stage, e.attempt])).toEqual([
      ['stage-1', 1],
      ['stage-2', 1],
    ]);
    expect(after.outcomes[0].result).toMatchObject({ attempt: 1 });
  });
});
