/**
 * `workhorse schema migrate` (alias `install`) and `workhorse schema status`: put the protocol's
 * tables and functions into a database or upgrade them step by step, and say where a database
 * stands against this package (pending steps, and which releases its live workers run).
 */
import { listWorkersOfAnySchema } from '../core/operator/live-workers';
import { getSchemaStatus, installSchema, pendingMigrationSteps, SCHEMA_VERSION, type SchemaStatus } from '../core/schema';
import type { MigrationStepInfo } from '../core/migration-steps';
import { EXIT, type ExitCode } from './cli.errors';
import { sqlState } from './database-connection';
import { messages } from './cli.messages';
import type { CommandContext, CommandGroup, RunnableCommand } from './command';

/** `schema status --json` names the situation, so scripts need not compare numbers. */
type SchemaSituation = 'up-to-date' | 'not-installed' | 'older' | 'newer';

const INSUFFICIENT_PRIVILEGE = '42501';

/** Live workers (not gone) running one package version. */
interface WorkerVersionCount {
  version: string;
  count: number;
}

function situation(status: SchemaStatus): SchemaSituation {
  if (status.installed === null) return 'not-installed';
  if (status.upToDate) return 'up-to-date';
  return status.installed < status.expected ? 'older' : 'newer';
}

function describeStatus(status: SchemaStatus, pending: readonly MigrationStepInfo[]): string {
  if (status.installed === null) return messages.schemaAbsent();
  if (status.upToDate) return messages.schemaUpToDate(status.installed);
  return status.installed < status.expected
    ? messages.schemaOlder(status.installed, status.expected, status.minimum, pending)
    : messages.schemaNewer(status.installed, status.expected, status.compatible);
}

/**
 * The registry's live workers grouped by the version they run (none when the schema is absent;
 * null when this role may not list them: listing needs the operator capability).
 */
async function workerVersions({ pool }: CommandContext, status: SchemaStatus): Promise<WorkerVersionCount[] | null> {
  if (status.installed === null) return [];
  let workers: Awaited<ReturnType<typeof listWorkersOfAnySchema>>;
  try {
    workers = await listWorkersOfAnySchema(pool);
  } catch (error) {
    if (sqlState(error) === INSUFFICIENT_PRIVILEGE) return null;
    throw error;
  }
  const counts = new Map<string, number>();
  for (const worker of workers) {
    if (worker.status !== 'gone') counts.set(worker.version, (counts.get(worker.version) ?? 0) + 1);
  }
  return [...counts].map(([version, count]) => ({ version, count })).sort((a, b) => a.version.localeCompare(b.version, 'en', { numeric: true }));
}

async function status(context: CommandContext): Promise<ExitCode> {
  const { pool, output } = context;
  const current = await getSchemaStatus(pool);
  const pending = pendingMigrationSteps(current.installed);
  const workers = await workerVersions(context, current);
  if (output.json) {
    output.document({ ...current, status: situation(current), pending, workers });
  } else {
    output.text(describeStatus(current, pending));
    output.text(messages.schemaWorkers(workers));
  }
  return current.upToDate ? EXIT.ok : EXIT.schemaNotReady;
}

async function migrate({ pool, output }: CommandContext): Promise<ExitCode> {
  // Refuses a newer version (SchemaVersionMismatchError) without changing anything.
  const result = await installSchema(pool);
  const changed = result.created || result.applied.length > 0;
  if (output.json) {
    output.document({ installed: result.to, expected: SCHEMA_VERSION, upToDate: result.to === SCHEMA_VERSION, changed, ...result });
  } else if (result.created) {
    output.text(messages.schemaInstalled(result.to));
  } else if (result.from !== null && result.applied.length > 0) {
    output.text(messages.schemaMigrated(result.from, result.to, result.applied));
  } else {
    output.text(messages.schemaAlreadyInstalled(result.to, SCHEMA_VERSION));
  }
  return EXIT.ok;
}

const MIGRATE_DESCRIPTION =
  'Installs the workhorse schema (tables, indexes and the versioned SQL functions) if the database has\n' +
  "none, or upgrades it to this package's version by applying each pending step (sql/migrations) in\n" +
  'its own transaction. Queued jobs, schedules and history are kept. Run it as the role that owns the\n' +
  'schema. Running it again does nothing; several migrators at once take turns and each step is applied\n' +
  'once. A schema is never downgraded: a newer one that still serves this release is left as it is, and\n' +
  'one that no longer does is refused, unchanged.';

function migrateCommand(name: string, summary: string): RunnableCommand {
  return {
    name,
    summary,
    description: MIGRATE_DESCRIPTION,
    examples: [`DATABASE_URL=postgres://owner@db:5432/app workhorse schema ${name}`, `workhorse schema ${name} --json`],
    run: migrate,
  };
}

export const schemaCommands: CommandGroup = {
  name: 'schema',
  summary: 'Install or upgrade the workhorse schema, or check which version a database holds.',
  subcommands: [
    migrateCommand('migrate', "Install the workhorse schema, or upgrade it to this package's version."),
    migrateCommand('install', 'The same as `schema migrate`: install the schema if it is absent, upgrade it if it is older.'),
    {
      name: 'status',
      summary: "Compare the database's schema version with this package's; list pending steps and live workers.",
      description:
        "Compares the schema version installed in the database with the version this package ships, lists\n" +
        'the migration steps `schema migrate` would apply (and whether each runs in one transaction), and\n' +
        'counts the live workers by the package version they run. Changes nothing. Exits 0 when the schema\n' +
        'is up to date and 3 when it is absent, older or newer, so deploy scripts can gate on it.',
      examples: ['workhorse schema status', 'workhorse schema status --json'],
      run: status,
    },
  ],
};
