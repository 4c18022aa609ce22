/**
 * A newcomer's first hour, done by a test (issue 16, items 1 and 4): the checkout is packed with
 * `npm pack`, and a new application installs the tarball with the Nest packages a `nest new`
 * application has, from npm's cache.
 *
 * - Types: test/fixtures/consumer-app/types-check.ts compiles there with `strict`, and the
 *   package's declarations without skipping them, under Nest 10's (`node10`) and Nest 11's
 *   (`nodenext`) module resolution. Its `@ts-expect-error` misuses (`pool.noSuchMethod()`, ...)
 *   and its type-level checks fail the compile if any public type is a silent `any` (as they
 *   did, and the declarations did, with `@types/pg` removed from the application).
 * - The Quickstart: the files of README.md's "Quickstart with Nest" and "Workers in their own
 *   process" sections (the blocks whose first line names a `src/` file, read from README.md at
 *   test time) are the application's sources; they compile with the tsconfig of a `nest new`
 *   application made strict; the section's SQL creates its table; and on the test PostgreSQL one
 *   order goes through the combined API and worker process (`src/main.ts`) and another through
 *   a web-only process and a worker process (`src/worker.ts`). SIGTERM drains the worker before
 *   each process exits (the README's `enableShutdownHooks()`), and the package's own `workhorse`
 *   executable reads the job.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Admin, type JobSnapshot } from '../../lib/core';
import { fencedBlocks, namedFile } from '../support/markdown';
import { freePort } from '../../lib/testing/free-port';
import { copyCheckout, devVersion, installApp, pack, ROOT, run, runOk, scratchDirectory, type Scratch } from '../support/package';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

/** What `nest new` puts in an application, in the versions this checkout's npm ci cached. */
const NEST_APP_DEPENDENCIES = Object.fromEntries(
  ['@nestjs/common', '@nestjs/core', '@nestjs/platform-express', 'reflect-metadata', 'rxjs', 'typescript', '@types/node'].map(
    (name) => [name, devVersion(name)],
  ),
);

/** What the tsconfig of a `nest new` application holds in Nest 10 and 11 alike, made strict (`strict: true` instead of its loosened flags). */
const NEST_APP_OPTIONS = {
  declaration: true,
  removeComments: true,
  emitDecoratorMetadata: true,
  experimentalDecorators: true,
  allowSyntheticDefaultImports: true,
  sourceMap: true,
  outDir: './dist',
  baseUrl: './',
  incremental: true,
  skipLibCheck: true,
  strict: true,
  forceConsistentCasingInFileNames: true,
};
/** Nest 11: Node's module resolution, which reads the package's `exports`. */
const NEST_11_OPTIONS = {
  ...NEST_APP_OPTIONS,
  module: 'nodenext',
  moduleResolution: 'nodenext',
  resolvePackageJsonExports: true,
  esModuleInterop: true,
  isolatedModules: true,
  target: 'ES2023',
};
/** Nest 10: CommonJS with TypeScript's classic node resolution, which reads `typesVersions` instead. */
const NEST_10_OPTIONS = { ...NEST_APP_OPTIONS, module: 'commonjs', target: 'ES2021' };

const PACKAGE_VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

const QUICKSTART_SECTIONS = ['Quickstart with Nest', 'Workers in their own process'];

let scratch: Scratch;
let app: string;
const processes: ChildProcess[] = [];

function writeJson(path: string, value: unknown): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
}

function tsc(project: string) {
  return run(process.execPath, [join(app, 'node_modules/typescript/bin/tsc'), '-p', project], { cwd: app, timeoutMs: 300_000 });
}

beforeAll(async () => {
  scratch = scratchDirectory('workhorse-consumer');
  const checkout = join(scratch.dir, 'checkout');
  app = join(scratch.dir, 'app');
  mkdirSync(checkout);
  mkdirSync(app);
  await copyCheckout(checkout);
  const { tarball } = await pack(checkout, { dryRun: false, destination: scratch.dir });
  await installApp(app, tarball, NEST_APP_DEPENDENCIES);
}, 660_000);

afterAll(() => {
  scratch?.remove();
});

/**
 * Type-checks test/fixtures/consumer-app/types-check.ts in the application with the
 * application's own TypeScript and `options`, and returns the diagnostics of that file and of
 * the package's declarations (with `skipLibCheck` off for them: a declaration that names a type
 * nobody installed is an error there, not an `any`). The declarations of Nest, RxJS and Node
 * are not checked: they are not ours, and checking them would triple the time.
 */
function checkConsumer(options: Record<string, unknown>): string[] {
  const ts = require(join(app, 'node_modules/typescript')) as typeof import('typescript');
  const dir = join(app, 'types-check');
  mkdirSync(dir, { recursive: true });
  const consumer = join(dir, 'types-check.ts');
  copyFileSync(join(ROOT, 'test/fixtures/consumer-app/types-check.ts'), consumer);
  const converted = ts.convertCompilerOptionsFromJson({ ...options, skipLibCheck: false, noEmit: true, incremental: false }, dir);
  expect(converted.errors).toEqual([]);
  const program = ts.createProgram({ rootNames: [consumer], options: converted.options });
  const ours = program
    .getSourceFiles()
    .filter((file) => file.fileName === consumer || file.fileName.includes('/node_modules/nestjs-workhorse/'));
  // The package's declarations were really read from the tarball's build, not from anywhere else.
  expect(ours.filter((file) => file.fileName.endsWith('/node_modules/nestjs-workhorse/dist/lib/index.d.ts'))).toHaveLength(1);
  const diagnostics = [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...ours.flatMap((file) => [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)]),
  ];
  return diagnostics.map((d) => {
    const where = d.file && d.start !== undefined ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : '';
    return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

describe('the public types in an application that installed the tarball', () => {
  it.each([
    ['Nest 11 (nodenext)', NEST_11_OPTIONS],
    ['Nest 10 (node10)', NEST_10_OPTIONS],
  ])('are real types under --strict with %s module resolution: every misuse is refused, nothing is any', (_label, options) => {
    expect(checkConsumer(options)).toEqual([]);
  });
});

describe("README.md's Quickstart, built from the tarball", () => {
  const blocks = fencedBlocks(ROOT, 'README.md').filter((block) => QUICKSTART_SECTIONS.includes(block.section));
  const { db } = useTestDatabase({
    installSchema: false,
    checkInvariants: false,
    beforeDrop: async () => {
      for (const child of processes) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  });

  it('says how to install the package and create its table', async () => {
    const shell = blocks.filter((block) => block.language === 'sh').map((block) => block.code);
    expect(shell[0]).toBe('npm install nestjs-workhorse');
    const sql = blocks.filter((block) => block.language === 'sql');
    expect(sql).toHaveLength(1);
    await db.pool.query(sql[0].code);
    const table = await db.pool.query("SELECT to_regclass('public.orders') IS NOT NULL AS present");
    expect(table.rows).toEqual([{ present: true }]);
  });

  it('compiles as written with the strict tsconfig of a new Nest application', async () => {
    const files = blocks.filter((block) => block.language === 'ts' && namedFile(block)?.startsWith('src/'));
    expect(files.map(namedFile).sort()).toEqual(
      expect.arrayContaining(['src/app.module.ts', 'src/main.ts', 'src/orders/order.handlers.ts', 'src/orders/orders.controller.ts', 'src/worker.ts']),
    );
    for (const block of files) {
      const path = join(app, namedFile(block) as string);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, `${block.code}\n`);
    }
    writeJson(join(app, 'tsconfig.json'), { compilerOptions: NEST_11_OPTIONS, include: ['src/**/*.ts'] });
    const result = await tsc(join(app, 'tsconfig.json'));
    expect({ code: result.code, output: result.stdout + result.stderr }).toEqual({ code: 0, output: '' });
  }, 330_000);

  /** Starts `node dist/<entry>.js` of the application with the environment the README gives. */
  function start(entry: string, env: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<void> } {
    const child = spawn(process.execPath, [join(app, 'dist', `${entry}.js`)], {
      cwd: app,
      env: { ...process.env, DATABASE_URL: db.url, RUN_WORKER: 'false', NO_COLOR: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    processes.push(child);
    let text = '';
    child.stdout?.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    return { child, output: () => text, exited };
  }

  async function listening(port: number, output: () => string): Promise<void> {
    await waitFor(
      async () => {
        const response = await fetch(`http://127.0.0.1:${port}/orders`).catch(() => null);
        return response !== null;
      },
      60_000,
      `the application to listen on port ${port}; it printed:\n${output()}`,
    );
  }

  async function placeOrder(port: number, id: string): Promise<string> {
    const response = await fetch(`http://127.0.0.1:${port}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id, amountCents: 4200 }),
    });
    expect(response.status).toBe(201);
    const { jobId } = (await response.json()) as { jobId: string };
    return jobId;
  }

  async function succeeded(jobId: string, output: () => string): Promise<JobSnapshot> {
    const admin = new Admin(db.pool);
    return waitFor(
      async () => {
        const job = await admin.getJob(jobId);
        return job?.state === 'succeeded' ? job : null;
      },
      60_000,
      `job ${jobId} to succeed; the application printed:\n${output()}`,
    );
  }

  async function stop(started: { child: ChildProcess; exited: Promise<void> }): Promise<void> {
    started.child.kill('SIGTERM');
    await started.exited;
  }

  it('runs one order through the API and its worker in one process (src/main.ts), and SIGTERM drains the worker', async () => {
    const port = await freePort();
    const combined = start('main', { RUN_WORKER: 'true', PORT: String(port) });
    await listening(port, combined.output);
    // The module installed the schema at start-up, and said so.
    expect(combined.output()).toContain('Installed the workhorse schema (version');

    const jobId = await placeOrder(port, 'order-1');
    const job = await succeeded(jobId, combined.output);
    expect({ type: job.type, queue: job.queue, payload: job.payload, result: job.result }).toEqual({
      type: 'order.fulfill',
      queue: 'orders',
      payload: { orderId: 'order-1' },
      result: { chargeId: 'ch_order-1', labelId: 'lb_order-1' },
    });
    // The order row and its job committed together.
    expect((await db.pool.query('SELECT id, amount_cents FROM orders')).rows).toEqual([{ id: 'order-1', amount_cents: 4200 }]);

    // The package's own executable, as `npx workhorse` runs it, reads the job from the tarball's build.
    const cli = await runOk(join(app, 'node_modules/.bin/workhorse'), ['jobs', 'get', jobId, '--json'], {
      cwd: app,
      env: { ...process.env, DATABASE_URL: db.url },
      timeoutMs: 60_000,
    });
    expect(JSON.parse(cli.stdout)).toMatchObject({ id: jobId, state: 'succeeded', result: { chargeId: 'ch_order-1' } });
    // It knows the version it was installed as (read from the tarball's package.json).
    const version = await runOk(join(app, 'node_modules/.bin/workhorse'), ['--version', '--json'], { cwd: app, timeoutMs: 60_000 });
    expect(JSON.parse(version.stdout)).toEqual({ version: PACKAGE_VERSION });

    await stop(combined);
    // enableShutdownHooks(): SIGTERM ran the shutdown hooks, which drain and stop the worker.
    expect(combined.output()).toMatch(/Worker \S+ stopped\./);
  }, 240_000);

  it('runs an order through a web-only process and a worker process of their own (src/main.ts, src/worker.ts)', async () => {
    const port = await freePort();
    const api = start('main', { PORT: String(port) });
    const worker = start('worker', { RUN_WORKER: 'true' });
    await listening(port, api.output);
    await waitFor(() => /Worker \S+ started/.test(worker.output()), 60_000, `the worker to start; it printed:\n${worker.output()}`);

    const jobId = await placeOrder(port, 'order-2');
    expect((await succeeded(jobId, worker.output)).result).toEqual({ chargeId: 'ch_order-2', labelId: 'lb_order-2' });
    // The web-only process runs no worker.
    expect(api.output()).not.toMatch(/Worker \S+ started/);

    await Promise.all([stop(api), stop(worker)]);
    expect(worker.output()).toMatch(/Worker \S+ stopped\./);
  }, 240_000);
});
