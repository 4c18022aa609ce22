/**
 * `npm run demo` for real: the demo script runs as a child process against a fresh test database
 * (DATABASE_URL set, so no embedded server), starts the API and two worker processes, and kills
 * the first worker with SIGKILL between the job's two stages. The test checks what the demo
 * claims against the database: one charge, one label, the job succeeded at attempt 2 after an
 * expired attempt 1; and that none of its processes outlived it.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Admin } from 'nestjs-workhorse';
import { expectSplitInvariant } from '../support/invariants';
import { useTestDatabase } from '../support/test-database';

const ROOT = join(__dirname, '..', '..');
const DEMO_TIMEOUT_MS = 150_000;

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
}

function runDemo(databaseUrl: string): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl };
  for (const name of Object.keys(env)) if (name.startsWith('SAMPLE_')) delete env[name];
  const child = spawn(process.execPath, [join(ROOT, 'scripts', 'run-ts.js'), join(ROOT, 'sample-app', 'demo.ts')], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), DEMO_TIMEOUT_MS - 10_000);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

describe('npm run demo', () => {
  const { db } = useTestDatabase({ checkInvariants: false });
  let run: Run;

  beforeAll(async () => {
    run = await runDemo(db.url);
  }, DEMO_TIMEOUT_MS);

  it('exits 0 and says the card was charged once and the label printed once', () => {
    if (run.code !== 0) throw new Error(`the demo exited with ${run.signal ?? run.code}:\n${run.output}`);
    expect(run.output).toContain('Killed worker A with SIGKILL:');
    expect(run.output).toMatch(/^Provider calls for order \S+: charge 1 \(.*\), label 1 \(.*\)$/m);
    expect(run.output).toContain('Card charged once and label printed once');
    expect(run.output).not.toContain('embedded PostgreSQL');
  });

  it('left one order whose job succeeded at attempt 2, after attempt 1 expired with the killed worker', async () => {
    const orders = await db.pool.query<{ id: string; job_id: string }>('SELECT id, job_id FROM sample_orders');
    expect(orders.rows).toHaveLength(1);
    const [{ id: orderId, job_id: jobId }] = orders.rows;

    const job = await new Admin(db.pool).getJob(jobId);
    expect(job).toMatchObject({ state: 'succeeded', currentAttempt: 2 });

    const attempts = await db.pool.query<{ attempt: number; outcome: string; worker_id: string }>(
      'SELECT attempt, outcome, worker_id FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY attempt',
      [jobId],
    );
    expect(attempts.rows).toEqual([
      { attempt: 1, outcome: 'expired', worker_id: 'worker-A' },
      { attempt: 2, outcome: 'succeeded', worker_id: 'worker-B' },
    ]);

    const calls = await db.pool.query<{ operation: string; n: number }>(
      'SELECT operation, count(*)::int AS n FROM sample_provider_calls WHERE order_id = $1 GROUP BY operation ORDER BY operation',
      [orderId],
    );
    expect(calls.rows).toEqual([
      { operation: 'charge', n: 1 },
      { operation: 'label', n: 1 },
    ]);
    // The charge came from worker A's process, the label from worker B's.
    const result = job?.result as { chargeId: string; labelId: string };
    const checkpoints = await db.pool.query<{ name: string; attempt: number }>(
      'SELECT name, attempt FROM workhorse.job_checkpoint WHERE job_id = $1 ORDER BY name',
      [jobId],
    );
    expect(checkpoints.rows).toEqual([
      { name: 'charge', attempt: 1 },
      { name: 'label', attempt: 2 },
    ]);
    expect(run.output).toContain(result.chargeId);
    await expectSplitInvariant(db.pool);
  });

  it('leaves none of its processes running', () => {
    const pids = [...run.output.matchAll(/\(pid (\d+)\)/g)].map((match) => Number(match[1]));
    expect(pids.length).toBeGreaterThanOrEqual(3); // the API, worker A, worker B
    expect(pids.filter(alive)).toEqual([]);
  });
});
