/**
 * The install lines a newcomer copies (issue 28, item 2): in a Nest 12 application as `nest new`
 * makes it (ESM, `nodenext`), with the packed tarball installed, every `npm install` line of
 * README.md's "Optional packages" runs as written (plain, no `--legacy-peer-deps`), and the
 * whole tree then resolves (`npm ls --all` finds nothing missing or invalid). With the ORMs so
 * installed (TypeORM 1.x, Prisma 7, Drizzle, Kysely 0.29), the examples of
 * docs/integrations.md are compiled by `tsc` with the application's tsconfig, as `nest build`
 * compiles them (Prisma's client generated into src/ first, from the document's schema), and
 * run on the test PostgreSQL: each ORM's transaction commits its row with the job, and rolls
 * both back when it throws.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Admin } from '../../lib/core';
import { fencedBlocks, namedFile, type Block } from '../support/markdown';
import { NEST_12 } from '../support/nest-lines';
import { copyCheckout, installApp, pack, ROOT, run, runOk, scratchDirectory, type Scratch } from '../support/package';
import { useTestDatabase } from '../support/test-database';

const ORDERS_TABLE_SQL = 'CREATE TABLE orders (id text PRIMARY KEY, amount_cents integer NOT NULL)';

/** The `npm install` commands of README.md's "Optional packages", one per line or `&&` part. */
function installCommands(): string[][] {
  const [block] = fencedBlocks(ROOT, 'README.md').filter((b) => b.section === 'Optional packages' && b.language === 'sh');
  return block.code
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('#'))
    .flatMap((line) => line.split(' && '))
    .map((command) => command.trim().split(/\s+/));
}

const integrations = fencedBlocks(ROOT, 'docs/integrations.md');
const inSection = (section: string, language: string): Block[] => integrations.filter((b) => b.section === section && b.language === language);

/** Entry points of the test's own, beside the document's files: each ORM's commit and rollback, printed as JSON. */
const ENTRY_POINTS: Record<string, string> = {
  'src/run-typeorm.ts': `import { NestFactory } from '@nestjs/core';
import { Queue } from 'nestjs-workhorse';
import { typeormTransactionScope } from 'nestjs-workhorse/typeorm';
import { DataSource } from 'typeorm';
import { AppModule } from './typeorm/app.module.js';
import { Order } from './typeorm/order.entity.js';
import { OrdersService } from './typeorm/orders.service.js';

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
const orders = app.get(OrdersService);
const committed = [await orders.place('t-1', 100), await orders.placeExplicitly('t-2', 200)];
const rolledBack = await typeormTransactionScope(app.get(DataSource))
  .run(async (manager) => {
    await manager.insert(Order, { id: 't-3', amountCents: 300 });
    await app.get(Queue).enqueue('order.fulfill', { orderId: 't-3' });
    throw new Error('rolled back');
  })
  .catch((error: Error) => error.message);
await app.close();
console.log(JSON.stringify({ committed, rolledBack }));
`,
  'src/run-prisma.ts': `import { NestFactory } from '@nestjs/core';
import { Queue } from 'nestjs-workhorse';
import { prismaTransactionScope } from 'nestjs-workhorse/prisma';
import { AppModule } from './prisma/app.module.js';
import { OrdersService } from './prisma/orders.service.js';
import { PrismaService } from './prisma/prisma.service.js';

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
const committed = [await app.get(OrdersService).place('p-1', 100)];
const rolledBack = await prismaTransactionScope(app.get(PrismaService))
  .run(async (tx) => {
    await tx.order.create({ data: { id: 'p-3', amountCents: 300 } });
    await app.get(Queue).enqueue('order.fulfill', { orderId: 'p-3' });
    throw new Error('rolled back');
  })
  .catch((error: Error) => error.message);
await app.close();
console.log(JSON.stringify({ committed, rolledBack }));
`,
};

let scratch: Scratch;
let app: string;

beforeAll(async () => {
  scratch = scratchDirectory('workhorse-install-lines');
  const checkout = join(scratch.dir, 'checkout');
  app = join(scratch.dir, 'app');
  mkdirSync(checkout);
  mkdirSync(app);
  await copyCheckout(checkout);
  const { tarball } = await pack(checkout, { dryRun: false, destination: scratch.dir });
  await installApp(app, tarball, NEST_12.dependencies, { type: 'module' });
}, 660_000);

afterAll(() => {
  scratch?.remove();
});

describe("README.md's optional packages in a new Nest 12 application", () => {
  const { db } = useTestDatabase({ checkInvariants: false });

  it('install line by line with a plain npm install, and resolve together: npm ls finds nothing missing or invalid', async () => {
    const commands = installCommands();
    expect(commands.map((command) => command.slice(0, 2).join(' '))).toEqual(commands.map(() => 'npm install'));
    for (const [npm, ...args] of commands) {
      await runOk(npm, [...args, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app, timeoutMs: 300_000 });
    }
    const listed = await run('npm', ['ls', '--all', '--json'], { cwd: app, timeoutMs: 120_000 });
    const problems = (JSON.parse(listed.stdout) as { problems?: string[] }).problems ?? [];
    expect({ code: listed.code, problems }).toEqual({ code: 0, problems: [] });
  }, 1_500_000);

  it("builds docs/integrations.md's TypeORM 1, Prisma 7, Drizzle and Kysely 0.29 examples as nest build does (Prisma's client generated into src/)", async () => {
    const files: Record<string, string> = { ...ENTRY_POINTS };
    for (const block of [...inSection('TypeORM', 'ts'), ...inSection('Prisma', 'ts')]) files[namedFile(block) as string] = block.code;
    // The unnamed scripts of the Drizzle and Kysely sections (no Nest).
    files['src/drizzle-example.ts'] = inSection('Drizzle', 'ts')[0].code;
    files['src/kysely-example.ts'] = inSection('Kysely', 'ts')[0].code;
    // The schema block, whose first line names its file (prisma/schema.prisma).
    const [schema] = inSection('Prisma', 'prisma');
    files[(/^\/\/ (\S+)$/.exec(schema.code.split('\n')[0]) as RegExpExecArray)[1]] = schema.code;
    for (const [path, code] of Object.entries(files)) {
      mkdirSync(dirname(join(app, path)), { recursive: true });
      writeFileSync(join(app, path), `${code}\n`);
    }

    // prisma generate, offline (see docs/integrations.md: any existing file stands in for the engine).
    await runOk(process.execPath, [join(app, 'node_modules/prisma/build/index.js'), 'generate', '--schema', 'prisma/schema.prisma'], {
      cwd: app,
      env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: join(app, 'prisma/schema.prisma'), CHECKPOINT_DISABLE: '1', PRISMA_HIDE_UPDATE_MESSAGE: '1' },
      timeoutMs: 180_000,
    });
    writeFileSync(join(app, 'tsconfig.json'), `${JSON.stringify({ compilerOptions: NEST_12.compilerOptions }, null, 2)}\n`);
    writeFileSync(join(app, 'tsconfig.build.json'), `${JSON.stringify(NEST_12.buildConfig, null, 2)}\n`);
    const result = await run(process.execPath, [join(app, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: app, timeoutMs: 300_000 });
    expect({ code: result.code, output: result.stdout + result.stderr }).toEqual({ code: 0, output: '' });
  }, 600_000);

  /** Runs `node dist/<entry>.js` on the test database and returns what it printed. */
  async function runEntry(entry: string): Promise<string> {
    const result = await runOk(process.execPath, [join(app, 'dist', `${entry}.js`)], {
      cwd: app,
      env: { ...process.env, DATABASE_URL: db.url, NO_COLOR: '1' },
      timeoutMs: 120_000,
    });
    return result.stdout;
  }

  /** The orders whose id starts with `prefix`, and the orders of the jobs enqueued since `since`. */
  async function stored(prefix: string, since: Date): Promise<{ orders: string[]; jobs: string[] }> {
    const orders = await db.pool.query<{ id: string }>('SELECT id FROM orders WHERE id LIKE $1 ORDER BY id', [`${prefix}%`]);
    const jobs = await new Admin(db.pool).listJobs({ type: 'order.fulfill', createdAfter: since });
    const jobOrders = jobs.items.map((job) => (job.payload as { orderId: string }).orderId).filter((id) => id.startsWith(prefix));
    return { orders: orders.rows.map((row) => row.id), jobs: jobOrders.sort() };
  }

  it.each([
    ['TypeORM 1 (through @nestjs/typeorm 12)', 'run-typeorm', 't-', ['t-1', 't-2']],
    ['Prisma 7', 'run-prisma', 'p-', ['p-1']],
  ])('runs the %s example: the order and its job commit together, and roll back together', async (_name, entry, prefix, ids) => {
    await db.pool.query(ORDERS_TABLE_SQL.replace('CREATE TABLE', 'CREATE TABLE IF NOT EXISTS'));
    const since = new Date();
    const printed = JSON.parse(await runEntry(entry)) as { committed: string[]; rolledBack: string };
    expect(printed.rolledBack).toBe('rolled back');
    expect(printed.committed).toHaveLength(ids.length);
    // The rolled-back order (x-3) left neither its row nor its job.
    expect(await stored(prefix, since)).toEqual({ orders: ids, jobs: ids });
  }, 180_000);

  it.each([
    ['Drizzle', 'drizzle-example', ['o-1', 'o-2']],
    ['Kysely 0.29', 'kysely-example', ['o-1']],
  ])("runs the %s example: its orders and their jobs are stored", async (_name, entry, ids) => {
    await db.pool.query('DROP TABLE IF EXISTS orders');
    await db.pool.query(ORDERS_TABLE_SQL);
    const since = new Date();
    await runEntry(entry);
    expect(await stored('o-', since)).toEqual({ orders: ids, jobs: ids });
  }, 180_000);
});
