/**
 * A sample entry point (`api.ts`, `worker.ts`) run as a child process of the demo: started through
 * scripts/run-ts.js like `npm run start:*` would, with JSON logs that the demo shows compactly,
 * one line per log record, prefixed with the process's name.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = join(__dirname, '..', '..');
const RUN_TS = join(ROOT, 'scripts', 'run-ts.js');

/** Nest's start-up chatter; the demo tells that part of the story itself. */
const QUIET_CONTEXTS = new Set(['NestFactory', 'InstanceLoader', 'RoutesResolver', 'RouterExplorer', 'NestApplication', 'SampleDatabase']);

/** This process's environment without the sample's own settings: the demo sets those it wants. */
function inheritedEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('SAMPLE_')));
}

interface LogRecord {
  level: string;
  context?: string;
  message: unknown;
}

export interface SampleProcessOptions {
  /** Shown before each of its log lines, e.g. `worker A`. */
  name: string;
  /** The entry point, relative to sample-app/: `api.ts`, `worker.ts`. */
  script: string;
  env: Record<string, string>;
  /** Where its log lines go. */
  print: (line: string) => void;
}

export class SampleProcess {
  readonly name: string;
  private readonly child: ChildProcess;
  private readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly watchers: Array<{ pattern: RegExp; resolve: (match: RegExpMatchArray) => void }> = [];

  constructor(options: SampleProcessOptions) {
    this.name = options.name;
    this.child = spawn(process.execPath, [RUN_TS, join(ROOT, 'sample-app', options.script)], {
      cwd: ROOT,
      env: { ...inheritedEnv(), ...options.env, SAMPLE_LOG_FORMAT: 'json' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.exit = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
    for (const stream of [this.child.stdout, this.child.stderr]) {
      if (stream) createInterface({ input: stream }).on('line', (line) => this.onLine(line, options.print));
    }
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves with the match of the first log message that matches; rejects if the process exits first. */
  waitForLog(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      const give = (error: Error) => {
        clearTimeout(timer);
        const index = this.watchers.indexOf(watcher);
        if (index >= 0) this.watchers.splice(index, 1);
        reject(error);
      };
      const timer = setTimeout(() => give(new Error(`${this.name}: no log line matching ${pattern} within ${timeoutMs} ms`)), timeoutMs);
      const watcher = {
        pattern,
        resolve: (match: RegExpMatchArray) => {
          clearTimeout(timer);
          resolve(match);
        },
      };
      this.watchers.push(watcher);
      void this.exit.then(({ code, signal }) => give(new Error(`${this.name} exited (${signal ?? `code ${code}`}) before logging ${pattern}`)));
    });
  }

  /** Sends the signal and waits for the exit; SIGKILL after `timeoutMs`. */
  async stop(signal: NodeJS.Signals, timeoutMs = 30_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.running) this.child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), timeoutMs);
    });
    const exited = await Promise.race([this.exit, late]);
    clearTimeout(timer);
    if (exited !== null) return exited;
    this.child.kill('SIGKILL');
    return this.exit;
  }

  private onLine(line: string, print: (line: string) => void): void {
    let record: LogRecord | null = null;
    try {
      const parsed = JSON.parse(line) as unknown;
      if (typeof parsed === 'object' && parsed !== null && 'level' in parsed && 'message' in parsed) record = parsed as LogRecord;
    } catch {
      record = null;
    }
    if (record === null) {
      print(`${this.name.padEnd(8)} | ${line}`);
      return;
    }
    const message = typeof record.message === 'string' ? record.message : JSON.stringify(record.message);
    for (const watcher of [...this.watchers]) {
      const match = message.match(watcher.pattern);
      if (match) {
        this.watchers.splice(this.watchers.indexOf(watcher), 1);
        watcher.resolve(match);
      }
    }
    if (record.level === 'debug' || record.level === 'verbose' || QUIET_CONTEXTS.has(record.context ?? '')) return;
    const level = record.level === 'log' ? '' : `${record.level.toUpperCase()} `;
    print(`${this.name.padEnd(8)} | ${level}${record.context ? `${record.context}: ` : ''}${message}`);
  }
}
