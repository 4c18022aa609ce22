/**
 * A newcomer's first hour, done by a test (issue 16, items 1 and 4; issue 28, item 1): the
 * checkout is packed with `npm pack`, and three new applications, one for each Nest major the
 * peer ranges accept (10, 11 and 12), install the tarball with the packages a `nest new` of that
 * major gives, with a plain `npm install` (no `--legacy-peer-deps`, no overrides). Nest 12's is
 * shaped as `nest new` 12 makes it: `"type": "module"`, `nodenext`, TypeScript 6, vitest.
 *
 * - Installation: each application has its own line's Nest, exactly once in its tree.
 * - Types: test/fixtures/consumer-app/types-check.ts compiles there with `strict`, and the
 *   package's declarations without skipping them, under each line's module resolution
 *   (`node10`; `nodenext` for CommonJS; `nodenext` for ESM). Its `@ts-expect-error` misuses
 *   (`pool.noSuchMethod()`, ...) and its type-level checks fail the compile if any public type
 *   is a silent `any` (as they did, and the declarations did, with `@types/pg` removed from the
 *   application).
 * - The Quickstart: the files of README.md's "Quickstart with Nest" and "Workers in their own
 *   process" sections (the blocks whose first line names a `src/` file, read from README.md at
 *   test time) are the application's sources; they compile with the line's tsconfig made
 *   strict; the section's SQL creates its table; and on the test PostgreSQL one order goes
 *   through a web-only process and a worker process (`src/worker.ts`). SIGTERM drains the
 *   worker before each process exits (the README's `enableShutdownHooks()`). In the Nest 12
 *   application (an ESM application that imports the CommonJS package, which loads Nest with
 *   `require(esm)`: one instance of Nest's classes, or its injection would fail) another order
 *   goes through the combined API and worker process (`src/main.ts`), the package's own
 *   `workhorse` executable reads the job, and a vitest test drains a job with
 *   `nestjs-workhorse/testing` (test/fixtures/consumer-app/drain.spec.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Admin, type JobSnapshot } from '../../lib/core';
import { fencedBlocks, namedFile } from '../support/markdown';
import { freePort } from '../../lib/testing/free-port';
import { NEST_LINES } from '../support/nest-lines';
import { copyCheckout, installApp, pack, ROOT, run, runOk, scratchDirectory, type Scratch } from '../support/package';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const PACKAGE_VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

const QUICKSTART_SECTIONS = ['Quickstart with Nest', 'Workers in their own process'];

let scratch: Scratch;
/** Each line's application directory, once the tarball and its dependencies are installed. */
const apps = new Map<string, string>();

function writeJson(path: string, value: unknown): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
}

// One pack, and the three applications installed side by side from npm's one cache.
beforeAll(async () => {
  scratch = scratchDirectory('workhorse-consumer');
  const checkout = join(scratch.dir, 'checkout');
  mkdirSync(checkout);
  await copyCheckout(checkout);
  const { tarball } = await pack(checkout, { dryRun: false, destination: scratch.dir });
  await Promise.all(
    NEST_LINES.map(async (line) => {
      const app = join(scratch.dir, line.name.replace(/\W+/g, '-').toLowerCase());
      mkdirSync(app);
      await installApp(app, tarball, line.dependencies, line.type === undefined ? {} : { type: line.type });
      apps.set(line.name, app);
    }),
  );
}, 900_000);

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
function checkConsumer(app: string, options: Record<string, unknown>): string[] {
  const ts = require(join(app, 'node_modules/typescript')) as typeof import('typescript');
  // Under test/, which the application's tsconfig.build.json leaves out of its build.
  const dir = join(app, 'test');
  mkdirSync(dir, { recursive: true });
  const consumer = join(dir, 'types-check.ts');
  copyFileSync(join(ROOT, 'test/fixtures/consumer-app/types-check.ts'), consumer);
  const converted = ts.convertCompilerOptionsFromJson({ ...options, skipLibCheck: false, noEmit: true, incremental: false }, dir);
  expect(converted.errors).toEqual([]);
  // Type libraries (`types`) resolve from the application, as its own tsc does.
  const host = ts.createCompilerHost(converted.options);
  host.getCurrentDirectory = () => app;
  const program = ts.createProgram({ rootNames: [consumer], options: converted.options, host });
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

describe.each(NEST_LINES)("README.md's Quickstart in a $name application, built from the tarball", (line) => {
  const blocks = fencedBlocks(ROOT, 'README.md').filter((block) => QUICKSTART_SECTIONS.includes(block.section));
  const processes: ChildProcess[] = [];
  const { db } = useTestDatabase({
    installSchema: false,
    checkInvariants: false,
    beforeDrop: async () => {
      for (const child of processes) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  });
  const app = () => apps.get(line.name) as string;

  it('installed with a plain npm install, Nest of its own line and exactly one copy of it', async () => {
    const versions = (name: string) => {
      const listed = JSON.parse(readFileSync(join(app(), 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
      return Object.entries(listed.packages)
        .filter(([path]) => path === `node_modules/${name}` || path.endsWith(`/node_modules/${name}`))
        .map(([path, entry]) => `${path}@${entry.version}`);
    };
    expect(versions('@nestjs/common')).toEqual([`node_modules/@nestjs/common@${line.dependencies['@nestjs/common']}`]);
    expect(versions('@nestjs/core')).toEqual([`node_modules/@nestjs/core@${line.dependencies['@nestjs/core']}`]);
    expect(versions('nestjs-workhorse')).toEqual([`node_modules/nestjs-workhorse@${PACKAGE_VERSION}`]);
  });

  it('has public types that are real types under --strict with its module resolution: every misuse is refused, nothing is any', () => {
    expect(checkConsumer(app(), line.compilerOptions)).toEqual([]);
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

  it('compiles as written with the strict tsconfig of a new application of its line', async () => {
    const files = blocks.filter((block) => block.language === 'ts' && namedFile(block)?.startsWith('src/'));
    expect(files.map(namedFile).sort()).toEqual(
      expect.arrayContaining(['src/app.module.ts', 'src/main.ts', 'src/orders/order.handlers.ts', 'src/orders/orders.controller.ts', 'src/worker.ts']),
    );
    for (const block of files) {
      const path = join(app(), namedFile(block) as string);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, `${block.code}\n`);
    }
    // As `nest build` compiles: tsconfig.build.json, the application's sources without its tests.
    writeJson(join(app(), 'tsconfig.json'), { compilerOptions: line.compilerOptions });
    writeJson(join(app(), 'tsconfig.build.json'), line.buildConfig);
    const result = await run(process.execPath, [join(app(), 'node_modules/typescript/bin/tsc'), '-p', join(app(), 'tsconfig.build.json')], {
      cwd: app(),
      timeoutMs: 300_000,
    });
    expect({ code: result.code, output: result.stdout + result.stderr }).toEqual({ code: 0, output: '' });
  }, 330_000);

  /** Starts `node dist/<entry>.js` of the application with the environment the README gives. */
  function start(entry: string, env: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<void> } {
    const child = spawn(process.execPath, [join(app(), 'dist', `${entry}.js`)], {
      cwd: app(),
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

  it('runs an order through a web-only process and a worker process of their own (src/main.ts, src/worker.ts), and SIGTERM drains the worker', async () => {
    const port = await freePort();
    const api = start('main', { PORT: String(port) });
    const worker = start('worker', { RUN_WORKER: 'true' });
    await listening(port, api.output);
    await waitFor(() => /Worker \S+ started/.test(worker.output()), 60_000, `the worker to start; it printed:\n${worker.output()}`);
    // The module installed the schema at start-up, and said so.
    expect(api.output() + worker.output()).toContain('Installed the workhorse schema (version');

    const jobId = await placeOrder(port, 'order-2');
    const job = await succeeded(jobId, worker.output);
    expect({ type: job.type, queue: job.queue, payload: job.payload, result: job.result }).toEqual({
      type: 'order.fulfill',
      queue: 'orders',
      payload: { orderId: 'order-2' },
      result: { chargeId: 'ch_order-2', labelId: 'lb_order-2' },
    });
    // The order row and its job committed together.
    expect((await db.pool.query('SELECT id, amount_cents FROM orders')).rows).toEqual([{ id: 'order-2', amount_cents: 4200 }]);
    // The web-only process runs no worker.
    expect(api.output()).not.toMatch(/Worker \S+ started/);

    await Promise.all([stop(api), stop(worker)]);
    // enableShutdownHooks(): SIGTERM ran the shutdown hooks, which drain and stop the worker.
    expect(worker.output()).toMatch(/Worker \S+ stopped\./);
    // Nothing warned on the way (an ESM application loads the package, and it Nest, with no warning).
    expect(api.output() + worker.output()).not.toMatch(/Warning|ERR_/);
  }, 240_000);

  // The combined process and the CLI once, in the application `nest new` makes today.
  if (line.name === 'Nest 12') {
    it('runs an order through the API and its worker in one process (src/main.ts); the workhorse executable reads the job', async () => {
      const port = await freePort();
      const combined = start('main', { RUN_WORKER: 'true', PORT: String(port) });
      await listening(port, combined.output);

      const jobId = await placeOrder(port, 'order-1');
      expect((await succeeded(jobId, combined.output)).result).toEqual({ chargeId: 'ch_order-1', labelId: 'lb_order-1' });

      // The package's own executable, as `npx workhorse` runs it, reads the job from the tarball's build.
      const cli = await runOk(join(app(), 'node_modules/.bin/workhorse'), ['jobs', 'get', jobId, '--json'], {
        cwd: app(),
        env: { ...process.env, DATABASE_URL: db.url },
        timeoutMs: 60_000,
      });
      expect(JSON.parse(cli.stdout)).toMatchObject({ id: jobId, state: 'succeeded', result: { chargeId: 'ch_order-1' } });
      // It knows the version it was installed as (read from the tarball's package.json).
      const version = await runOk(join(app(), 'node_modules/.bin/workhorse'), ['--version', '--json'], { cwd: app(), timeoutMs: 60_000 });
      expect(JSON.parse(version.stdout)).toEqual({ version: PACKAGE_VERSION });

      await stop(combined);
      expect(combined.output()).toMatch(/Worker \S+ stopped\./);
    }, 240_000);
  }

  // Nest 12's tests run with vitest: nestjs-workhorse/testing drains a job there.
  if (line.vitest) {
    it('drains a job with nestjs-workhorse/testing in a vitest test (vitest run)', async () => {
      copyFileSync(join(ROOT, 'test/fixtures/consumer-app/drain.spec.ts'), join(app(), 'src/drain.spec.ts'));
      // The test configuration `nest new` 12 writes, without its tsconfig-paths plugin (no paths here).
      writeFileSync(join(app(), 'vitest.config.ts'), "import { defineConfig } from 'vitest/config';\n\nexport default defineConfig({ test: { globals: true, root: './', include: ['**/*.spec.ts'] } });\n");
      const result = await run(process.execPath, [join(app(), 'node_modules/vitest/vitest.mjs'), 'run'], {
        cwd: app(),
        env: { ...process.env, DATABASE_URL: db.url, NO_COLOR: '1', CI: 'true' },
        timeoutMs: 180_000,
      });
      const output = result.stdout + result.stderr;
      const passed = result.code === 0 && /Tests\s+1 passed \(1\)/.test(output);
      expect({ passed, output: passed ? '' : output }).toEqual({ passed: true, output: '' });
      // The job vitest drained is in the database, done.
      const drained = await new Admin(db.pool).listJobs({ type: 'greeting.send' });
      expect(drained.items.map((job) => [job.state, job.result])).toEqual([['succeeded', { text: 'Hello, vitest' }]]);
    }, 240_000);
  }
});
