/**
 * Worker processes running the handlers of test/fixtures/wait-handlers.ts (through
 * test/fixtures/wait-worker.ts), for the SIGKILL tests of signals and human decisions: start
 * one, wait for a line it prints, kill it with SIGKILL, and kill whatever is left at the end.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { waitFor } from './wait';

const FIXTURE = join(__dirname, '..', 'fixtures', 'wait-worker.ts');
const REGISTER = require.resolve('./ts-register.js');

export interface WaitWorkerProcess {
  process: ChildProcessWithoutNullStreams;
  lines: string[];
  stderr: string[];
  exited: Promise<void>;
}

const started: WaitWorkerProcess[] = [];

/**
 * Starts a worker process on `queue`; with `hang` its handlers never return once their wait
 * answered; `failpoints` (WORKHORSE_FAILPOINTS, see lib/core/failpoints.ts) make it kill itself there.
 */
export function spawnWaitWorker(databaseUrl: string, queue: string, workerId: string, hang: boolean, failpoints = ''): WaitWorkerProcess {
  const proc = spawn(process.execPath, ['-r', REGISTER, FIXTURE], {
    env: {
      ...process.env,
      WAIT_DATABASE_URL: databaseUrl,
      WAIT_WORKER_ID: workerId,
      WAIT_QUEUE: queue,
      WAIT_HANG: hang ? '1' : '0',
      WORKHORSE_FAILPOINTS: failpoints,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const child: WaitWorkerProcess = { process: proc, lines: [], stderr: [], exited: new Promise<void>((resolve) => proc.once('exit', () => resolve())) };
  started.push(child);
  createInterface({ input: proc.stdout }).on('line', (line) => child.lines.push(line));
  proc.stderr.on('data', (chunk: Buffer) => child.stderr.push(chunk.toString()));
  return child;
}

/** Resolves once the process printed `line`; fails at once if it exited. */
export async function waitForLine(child: WaitWorkerProcess, line: string): Promise<void> {
  await waitFor(
    () => {
      if (child.process.exitCode !== null) throw new Error(`wait-worker exited early: ${child.stderr.join('')}`);
      return child.lines.includes(line);
    },
    // A process started on a loaded 2-core machine can take this long to compile and connect.
    45_000,
    `${line} from the worker process`,
  );
}

/** Kills the process with SIGKILL and resolves once it is gone. */
export async function kill9(child: WaitWorkerProcess): Promise<void> {
  child.process.kill('SIGKILL');
  await child.exited;
  if (child.process.signalCode !== 'SIGKILL') throw new Error(`the worker process ended by ${String(child.process.signalCode)}, not SIGKILL`);
}

/** Kills every process this module started that is still running (for afterAll). */
export async function killWaitWorkers(): Promise<void> {
  for (const child of started.splice(0)) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
    await child.exited;
  }
}
