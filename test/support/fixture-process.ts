/**
 * Real processes for tests: a TypeScript fixture (test/fixtures/*.ts) run by plain node, its
 * stdout read line by line, and nothing left running when the file ends.
 *
 *     const children = new FixtureProcesses();
 *     const child = children.start(FIXTURE, { CRASH_DATABASE_URL: db.url });
 *     await waitForLine(child, 'READY ', 20_000);
 *     afterAll(() => children.killAll());
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { waitFor } from './wait';

const REGISTER = require.resolve('./ts-register.js');

export interface FixtureProcess {
  process: ChildProcessWithoutNullStreams;
  /** Every stdout line so far. */
  lines: string[];
  stderr: string[];
  exited: Promise<void>;
}

/** The fixture processes of one test file. */
export class FixtureProcesses {
  private readonly started: FixtureProcess[] = [];

  /** Starts `file` (a .ts fixture) with `env` added to this process' environment. */
  start(file: string, env: Record<string, string>): FixtureProcess {
    const proc = spawn(process.execPath, ['-r', REGISTER, file], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const child: FixtureProcess = {
      process: proc,
      lines: [],
      stderr: [],
      exited: new Promise<void>((resolve) => proc.once('exit', () => resolve())),
    };
    createInterface({ input: proc.stdout }).on('line', (line) => child.lines.push(line));
    proc.stderr.on('data', (chunk: Buffer) => child.stderr.push(chunk.toString()));
    this.started.push(child);
    return child;
  }

  /** Whatever happened in the test, no child outlives the file: SIGKILL to each still running. */
  async killAll(): Promise<void> {
    for (const child of this.started.splice(0)) {
      if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
      await child.exited;
    }
  }
}

/** The first stdout line of `child` that starts with `prefix`; fails if the child exits first. */
export function waitForLine(child: FixtureProcess, prefix: string, timeoutMs: number): Promise<string> {
  return waitFor(
    () => {
      const line = child.lines.find((l) => l.startsWith(prefix));
      if (line === undefined && child.process.exitCode !== null) {
        throw new Error(`the process exited with ${child.process.exitCode} before printing ${prefix}: ${child.stderr.join('')}`);
      }
      return line;
    },
    timeoutMs,
    `"${prefix}" from the process (stderr: ${child.stderr.join('')})`,
  );
}
