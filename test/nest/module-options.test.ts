/**
 * Module set-up: forRoot / forRootAsync (useFactory with an injected config provider,
 * useClass, useExisting), who closes which pool, `isGlobal`, `schema: 'install' | 'verify'`,
 * and the start-up validation of the options.
 */
import { Inject, Injectable, Logger, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  Admin,
  grantAppRole,
  Pool,
  Queue,
  MIN_SCHEMA_VERSION,
  SCHEMA_VERSION,
  WorkhorseConfigurationError,
  WorkhorseModule,
  type WorkhorseModuleOptions,
  type WorkhorseOptionsFactory,
} from 'nestjs-workhorse';
import { BASELINE_VERSION, installBaseline } from '../support/baseline';
import { createTestDatabase, databaseUrl } from '../support/db';
import { LoginRoles } from '../support/roles';
import { stateOf } from '../support/job-state';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

/** Stands in for @nestjs/config: a provider module that other modules import for settings. */
@Injectable()
class AppConfig {
  private readonly values = new Map<string, string>();

  set(key: string, value: string): void {
    this.values.set(key, value);
  }

  get(key: string): string {
    const value = this.values.get(key);
    if (value === undefined) throw new Error(`missing setting ${key}`);
    return value;
  }
}

const sharedConfig = new AppConfig();

@Module({ providers: [{ provide: AppConfig, useValue: sharedConfig }], exports: [AppConfig] })
class AppConfigModule {}

@Injectable()
class WorkhorseSettings implements WorkhorseOptionsFactory {
  constructor(@Inject(AppConfig) private readonly config: AppConfig) {}

  createWorkhorseOptions(): WorkhorseModuleOptions {
    return { connectionString: this.config.get('DATABASE_URL') };
  }
}

@Module({ imports: [AppConfigModule], providers: [WorkhorseSettings], exports: [WorkhorseSettings] })
class WorkhorseSettingsModule {}

@Injectable()
class FeatureService {
  constructor(readonly queue: Queue) {}
}

@Module({ providers: [FeatureService] })
class FeatureModule {}

const { db } = useTestDatabase({ checkInvariants: false });

beforeAll(async () => {
  quietNestLogs();
  sharedConfig.set('DATABASE_URL', db.url);
});

async function enqueueWorks(queue: Queue): Promise<void> {
  const jobId = await queue.enqueue('ping', {});
  expect(await stateOf(db.pool, jobId)).toBe('ready');
}

describe('forRootAsync', () => {
  it('takes its options from a factory with injected config, and closes the pool it created', async () => {
    const moduleRef = await startModule({
      imports: [
        WorkhorseModule.forRootAsync({
          imports: [AppConfigModule],
          inject: [AppConfig],
          useFactory: async (config: AppConfig) => ({ connectionString: config.get('DATABASE_URL'), poolConfig: { max: 3 } }),
        }),
        FeatureModule,
      ],
    });
    // Global by default: FeatureModule injects Queue without importing WorkhorseModule.
    const queue = moduleRef.get(FeatureService).queue;
    await enqueueWorks(queue);
    expect(queue.pool.options.max).toBe(3);
    await moduleRef.close();
    expect(queue.pool.ended).toBe(true);
    expect(queue.pool.totalCount).toBe(0);
  });

  it('accepts useClass and useExisting option factories', async () => {
    for (const asyncOptions of [
      { imports: [AppConfigModule], useClass: WorkhorseSettings },
      { imports: [WorkhorseSettingsModule], useExisting: WorkhorseSettings },
    ]) {
      const moduleRef = await startModule({ imports: [WorkhorseModule.forRootAsync(asyncOptions)] });
      await enqueueWorks(moduleRef.get(Queue));
      await moduleRef.close();
    }
  });

  it('leaves a pool it was given open on close', async () => {
    const pool = new Pool({ connectionString: db.url, max: 2 });
    try {
      const moduleRef = await startModule({ imports: [WorkhorseModule.forRootAsync({ useFactory: () => ({ pool }) })] });
      expect(moduleRef.get(Queue).pool).toBe(pool);
      await moduleRef.close();
      expect(pool.ended).toBe(false);
      await expect(pool.query('SELECT 1 AS one')).resolves.toHaveProperty('rows', [{ one: 1 }]);
    } finally {
      await pool.end();
    }
  });

  it('is not global with isGlobal: false', async () => {
    const attempt = Test.createTestingModule({
      imports: [WorkhorseModule.forRoot({ connectionString: db.url, isGlobal: false }), FeatureModule],
    }).compile();
    await expect(attempt).rejects.toThrow(/Queue/);
  });
});

describe("schema: 'install' | 'verify'", () => {
  it("'verify' refuses to start on a database without the schema, saying what to do", async () => {
    const empty = await createTestDatabase({ installSchema: false });
    try {
      const attempt = startModule({ imports: [WorkhorseModule.forRoot({ connectionString: empty.url, schema: 'verify' })] });
      await expect(attempt).rejects.toBeInstanceOf(WorkhorseConfigurationError);
      await expect(attempt).rejects.toThrow(
        "WorkhorseModule (schema: 'verify') refuses to start: The workhorse schema is not installed in this database",
      );
      await expect(attempt).rejects.toThrow("Or let this process install the schema with schema: 'install'.");
      // It changed nothing.
      const { rows } = await empty.pool.query("SELECT to_regclass('workhorse.job') AS t");
      expect(rows[0].t).toBeNull();
    } finally {
      await empty.drop();
    }
  });

  it("'verify' refuses a newer schema that no longer serves this release, and 'install' does too", async () => {
    const other = await createTestDatabase();
    try {
      await other.pool.query('UPDATE workhorse.schema_version SET version = 999');
      await other.pool.query('CREATE OR REPLACE FUNCTION workhorse.oldest_client_v1() RETURNS integer LANGUAGE sql STABLE AS $$ SELECT 999 $$');
      for (const schema of ['verify', 'install'] as const) {
        const attempt = startModule({ imports: [WorkhorseModule.forRoot({ connectionString: other.url, schema })] });
        await expect(attempt).rejects.toThrow(`(schema: '${schema}') refuses to start: The workhorse schema in this database is version 999`);
      }
    } finally {
      await other.drop();
    }
  });

  it("'verify' starts on an installed schema, and 'install' installs a missing one", async () => {
    const logs = jest.spyOn(Logger.prototype, 'log');
    const installLines = () => logs.mock.calls.map(([message]) => String(message)).filter((line) => line.includes('workhorse schema'));
    try {
      const verified = await startModule({ imports: [WorkhorseModule.forRoot({ connectionString: db.url, schema: 'verify' })] });
      await verified.close();
      const present = await startModule({ imports: [WorkhorseModule.forRoot({ connectionString: db.url })] });
      await present.close();
      // Nothing was installed, so nothing says so.
      expect(installLines()).toEqual([]);

      const empty = await createTestDatabase({ installSchema: false });
      try {
        const installed = await startModule({ imports: [WorkhorseModule.forRoot({ connectionString: empty.url })] });
        const jobId = await installed.get(Queue).enqueue('ping', {});
        expect(await stateOf(empty.pool, jobId)).toBe('ready');
        await installed.close();
        // The one start that installed the schema says so, once.
        expect(installLines()).toEqual([
          `Installed the workhorse schema (version ${SCHEMA_VERSION}) in this database: its tables and SQL functions live in the "workhorse" schema.`,
        ]);
      } finally {
        await empty.drop();
      }
    } finally {
      logs.mockRestore();
    }
  });
});

describe("schema: 'install' | 'verify' on the baseline schema (version 4)", () => {
  it("'verify' refuses it and changes nothing (this release needs MIN_SCHEMA_VERSION); 'install' migrates it, and says so once", async () => {
    const old = await createTestDatabase({ installSchema: false });
    const logs = jest.spyOn(Logger.prototype, 'log');
    const schemaLines = () => logs.mock.calls.map(([message]) => String(message)).filter((line) => line.includes('workhorse schema'));
    try {
      await installBaseline(old.pool);
      const version = async () => (await old.pool.query('SELECT version FROM workhorse.schema_version')).rows[0].version as number;
      await expect(startModule({ imports: [WorkhorseModule.forRoot({ connectionString: old.url, schema: 'verify' })] })).rejects.toThrow(
        `(schema: 'verify') refuses to start: The workhorse schema in this database is version ${BASELINE_VERSION}, older than this package needs (version ${MIN_SCHEMA_VERSION} to ${SCHEMA_VERSION})`,
      );
      expect(await version()).toBe(BASELINE_VERSION);
      expect(schemaLines()).toEqual([]);
      // A job the old release enqueued is kept by the migration.
      const enqueued = await old.pool.query<{ job_id: string }>('SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)', [JSON.stringify([{ type: 'ping', payload: {} }])]);
      const jobId = enqueued.rows[0].job_id;

      const migrated = await startModule({ imports: [WorkhorseModule.forRoot({ connectionString: old.url })] });
      await migrated.close();
      expect(await version()).toBe(SCHEMA_VERSION);
      expect(await stateOf(old.pool, jobId)).toBe('ready');
      const steps = Array.from({ length: SCHEMA_VERSION - BASELINE_VERSION }, (_, i) => BASELINE_VERSION + 1 + i);
      expect(schemaLines()).toEqual([
        `Migrated the workhorse schema from version ${BASELINE_VERSION} to ${SCHEMA_VERSION} (step${steps.length === 1 ? '' : 's'} ${steps.join(', ')}); queued jobs, schedules and history are kept.`,
      ]);
      const again = await startModule({ imports: [WorkhorseModule.forRoot({ connectionString: old.url })] });
      await again.close();
      expect(schemaLines()).toHaveLength(1);
    } finally {
      logs.mockRestore();
      await old.drop();
    }
  });
});

describe("schema: 'install' with a role that may not migrate", () => {
  const roles = new LoginRoles();
  afterAll(() => roles.dropAll());

  it('refuses to start on an older schema, saying why (the deploy migrates as the owner, or the process uses verify)', async () => {
    const old = await createTestDatabase({ installSchema: false });
    try {
      await installBaseline(old.pool);
      const app = await roles.create(old.url, 'wh_nest_not_owner_old');
      await grantAppRole(old.pool, app.name);
      await expect(startModule({ imports: [WorkhorseModule.forRoot({ connectionString: app.url })] })).rejects.toThrow(
        /WorkhorseModule \(schema: 'install'\) refuses to start: Cannot migrate the workhorse schema to version \d+ as this role/,
      );
    } finally {
      await old.drop();
    }
  });
});

describe('queues: flow control applied at start-up', () => {
  it('gives each named queue exactly its policy, leaves other queues alone, and changes nothing when started again', async () => {
    const admin = new Admin(db.pool);
    await admin.setQueuePolicy('fr-other', { concurrency: 9 });
    await admin.setQueuePolicy('fr-emails', { concurrency: 3 });
    const queues = { 'fr-billing': { concurrency: 5 }, 'fr-emails': { rateLimit: { limit: 50, intervalMs: 1000 } } };
    const first = await startModule({ imports: [WorkhorseModule.forRoot({ connectionString: db.url, queues })] });
    await first.close();
    const listed = async () => Object.fromEntries((await admin.listQueues()).map((q) => [q.queue, q]));
    const after = await listed();
    expect(after['fr-billing']).toMatchObject({ concurrency: 5, rateLimit: null });
    // Replaced as a whole: the concurrency set before is gone.
    expect(after['fr-emails']).toMatchObject({ concurrency: null, rateLimit: { limit: 50, intervalMs: 1000 } });
    expect(after['fr-other']).toMatchObject({ concurrency: 9 });
    const { rows: before } = await db.pool.query("SELECT queue, changed_at, changed_by FROM workhorse.queue_policy WHERE queue LIKE 'fr-%' ORDER BY queue");
    expect(before.find((r) => r.queue === 'fr-billing')?.changed_by).toBe('WorkhorseModule.forRoot');

    const second = await startModule({ imports: [WorkhorseModule.forRoot({ connectionString: db.url, queues })] });
    await second.close();
    const { rows: again } = await db.pool.query("SELECT queue, changed_at, changed_by FROM workhorse.queue_policy WHERE queue LIKE 'fr-%' ORDER BY queue");
    expect(again).toEqual(before);
  });
});

describe('option validation at start-up', () => {
  const cases: [string, unknown, string][] = [
    ['an unknown key', { connectionString: 'postgres://x/y', concurrency: 5 }, '"concurrency" is not an option'],
    ['no database', { worker: {} }, 'needs a database: give connectionString'],
    ['two databases', { connectionString: 'postgres://x/y', pool: new Pool() }, 'give connectionString or pool, not both'],
    ['an empty connection string', { connectionString: '' }, 'connectionString must be a non-empty string'],
    ['a pool that is no pool', { pool: { query: 1 } }, 'pool must be a pg Pool'],
    ['poolConfig with a given pool', { pool: new Pool(), poolConfig: { max: 1 } }, 'poolConfig configures the pool the module creates'],
    ['a connection string in poolConfig', { connectionString: 'postgres://x/y', poolConfig: { connectionString: 'postgres://x/z' } }, 'put the connection string in the connectionString option'],
    ['a bad schema mode', { connectionString: 'postgres://x/y', schema: 'migrate' }, `schema must be 'install'`],
    ['a bad worker value', { connectionString: 'postgres://x/y', worker: true }, 'worker must be an object of worker settings'],
    ['a bad worker setting', { connectionString: 'postgres://x/y', worker: { concurrency: 0 } }, 'worker.concurrency: must be an integer from 1 to 1000'],
    ['an unknown worker setting', { connectionString: 'postgres://x/y', worker: { concurency: 5 } }, 'worker.concurency: is not a worker option'],
    ['a heartbeat no shorter than the lease', { connectionString: 'postgres://x/y', worker: { leaseMs: 5000, heartbeatMs: 5000 } }, 'worker.heartbeatMs: must be below leaseMs (5000)'],
    ['a bad requestTransactions', { connectionString: 'postgres://x/y', requestTransactions: 'yes' }, 'requestTransactions must be true or false'],
    ['a bad requireTransaction', { connectionString: 'postgres://x/y', requireTransaction: 'yes' }, 'requireTransaction must be true or false'],
    ['a requireTransaction of 1', { connectionString: 'postgres://x/y', requireTransaction: 1 }, 'requireTransaction must be true or false, got number 1'],
    ['a transaction that is no TransactionSource', { connectionString: 'postgres://x/y', transaction: {} }, 'transaction must be an object with a current() method'],
    ['queues that are a list', { connectionString: 'postgres://x/y', queues: [{ concurrency: 1 }] }, 'queues must be an object of policies by queue name'],
    ['a bad queue name in queues', { connectionString: 'postgres://x/y', queues: { 'bad queue': { concurrency: 1 } } }, 'queues: "bad queue" is not a queue name'],
    ['a queue policy that is a number', { connectionString: 'postgres://x/y', queues: { billing: 5 } }, 'queues.billing: must be an object'],
    ['a bad concurrency in queues', { connectionString: 'postgres://x/y', queues: { billing: { concurrency: 0 } } }, 'queues.billing.concurrency: must be an integer from 1 to 100000'],
    ['a bad per-key limit in queues', { connectionString: 'postgres://x/y', queues: { imports: { perKey: { concurrency: 0 } } } }, 'queues.imports.perKey.concurrency: must be an integer from 1 to 100000'],
    ['a rate limit without its interval in queues', { connectionString: 'postgres://x/y', queues: { emails: { rateLimit: { limit: 5 } } } }, 'queues.emails.rateLimit.intervalMs: must be an integer from 1 to 86400000'],
  ];

  it.each(cases)('refuses %s with a clear message, before connecting', async (_label, options, message) => {
    const attempt = Test.createTestingModule({
      imports: [WorkhorseModule.forRoot(options as WorkhorseModuleOptions)],
    }).compile();
    await expect(attempt).rejects.toBeInstanceOf(WorkhorseConfigurationError);
    await expect(attempt).rejects.toThrow(message);
  });

  it('reports a database it cannot reach', async () => {
    const unreachable = new URL(databaseUrl('nope'));
    unreachable.port = '1';
    const attempt = startModule({ imports: [WorkhorseModule.forRoot({ connectionString: unreachable.toString() })] });
    await expect(attempt).rejects.toThrow('WorkhorseModule could not install the workhorse schema');
  });
});
