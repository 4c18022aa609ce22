/**
 * The package as a user gets it, for the packaging tests (test/package/): a copy of this
 * checkout, packed with npm (whose prepack builds it), and throw-away applications that install
 * the tarball.
 *
 * The copy holds what a fresh clone would (the files git tracks, plus new files it does not
 * ignore), with this checkout's node_modules linked in for the build's compiler; so packing never
 * writes dist/ into the checkout the other tests run from. Applications install from npm's cache
 * where it has the package (`--prefer-offline`: after `npm ci` it has our dev dependencies, Nest
 * 12 among them), and from the registry otherwise (Nest 10 and 11, TypeScript 6, vitest, the
 * optional packages' install lines), once per machine.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

export const ROOT = resolve(__dirname, '../..');

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to its end and returns what it printed. A command that outlives `timeoutMs`
 * is killed, and the run rejects with its output so far.
 */
export function run(command: string, args: readonly string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} took longer than ${options.timeoutMs} ms\n${stdout}\n${stderr}`));
    }, options.timeoutMs ?? 120_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

/** Like {@link run}, but a non-zero exit rejects with the command's output. */
export async function runOk(command: string, args: readonly string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<Run> {
  const result = await run(command, args, options);
  if (result.code !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited with ${result.code ?? result.signal}\n${result.stdout}\n${result.stderr}`);
  }
  return result;
}

/** The files a fresh clone of this checkout would have, with its uncommitted changes. */
async function checkoutFiles(): Promise<string[]> {
  const listed = await runOk('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT });
  // A tracked file deleted in the working tree is still listed by --cached.
  return [...new Set(listed.stdout.split('\0').filter((file) => file !== ''))].filter((file) => existsSync(join(ROOT, file)));
}

export interface Scratch {
  dir: string;
  remove(): void;
}

/** A new, empty temporary directory; `remove()` deletes it with everything in it. */
export function scratchDirectory(prefix: string): Scratch {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Copies the checkout into `dir` (see the file comment); node_modules is a link to this one's. */
export async function copyCheckout(dir: string): Promise<void> {
  for (const file of await checkoutFiles()) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    copyFileSync(join(ROOT, file), join(dir, file));
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
}

/** One file of `npm pack --json`'s answer. */
export interface PackedFile {
  path: string;
  size: number;
}

export interface Packed {
  /** The tarball's path (after a real pack) or its would-be name (after a dry run). */
  tarball: string;
  files: PackedFile[];
  unpackedSize: number;
}

/**
 * Runs `npm pack --json` in `dir` (a copy of the checkout), which runs prepack and so builds
 * the package first. With `dryRun` nothing is written but the build; otherwise the tarball
 * goes to `destination`.
 */
export async function pack(dir: string, options: { dryRun: true } | { dryRun: false; destination: string }): Promise<Packed> {
  const args = options.dryRun ? ['pack', '--dry-run', '--json'] : ['pack', '--json', '--pack-destination', options.destination];
  const result = await runOk('npm', args, { cwd: dir, timeoutMs: 300_000 });
  // npm prints exactly one JSON document on stdout: the build must not print there.
  const [report] = JSON.parse(result.stdout) as { filename: string; files: PackedFile[]; unpackedSize: number }[];
  return {
    tarball: options.dryRun ? report.filename : join(options.destination, report.filename),
    files: report.files,
    unpackedSize: report.unpackedSize,
  };
}

/** The versions of this checkout's dev dependencies, so that applications install what npm ci cached. */
export function devVersion(name: string): string {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
  const version = manifest.devDependencies[name];
  if (!version) throw new Error(`${name} is not a dev dependency of this package`);
  return version;
}

/**
 * Creates an application in `dir` that depends on the tarball and on `dependencies` (with
 * `manifestFields` in its package.json, such as `"type": "module"`), and installs them with a
 * plain `npm install`, from npm's cache where it has them.
 */
export async function installApp(
  dir: string,
  tarball: string,
  dependencies: Record<string, string>,
  manifestFields: { type?: 'module' } = {},
): Promise<void> {
  const manifest = {
    name: 'workhorse-consumer-app',
    version: '0.0.0',
    private: true,
    ...manifestFields,
    dependencies: { 'nestjs-workhorse': `file:${tarball}`, ...dependencies },
  };
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await runOk('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, timeoutMs: 300_000 });
}
