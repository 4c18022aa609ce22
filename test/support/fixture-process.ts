/**
 * Fixture processes (test/fixtures/*.ts) run with plain node and the test's TypeScript hook:
 * their stdout lines and stderr are collected, and `killFixtureProcesses` makes sure none
 * outlives the test file.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

const REGISTER = require.resolve('./ts-register.js');

export interface FixtureProcess {
  process: ChildProcessWithoutNullStreams;
  /** Every stdout line so far. */
  lines: string[];
  stderr: string[];
  exited: Promise<void>;
}

/** Starts `fixture` (a path) with `env` added to this process's environment. */
export function startFixtureProcess(fixture: string, env: Record<string, string>): FixtureProcess {
  const proc = spawn(process.execPath, ['-r', REGISTER, fixture], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  const child: FixtureProcess = {
    process: proc,
    lines: [],
    stderr: [],
    exited: new Promise<void>((resolve) => proc.once('exit', () => resolve())),
  };
  createInterface({ input: proc.stdout }).on('line', (line) => child.lines.push(line));
  proc.stderr.on('data', (chunk: Buffer) => child.stderr.push(chunk.toString()));
  return child;
}

/** SIGKILLs every process of `children` still running and waits for each to exit. */
export async function killFixtureProcesses(children: readonly FixtureProcess[]): Promise<void> {
  for (const child of children) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
    await child.exited;
  }
}
