/**
 * The `workhorse` command table, and the options every command accepts. A new command group
 * (`workhorse waits ...`) or top-level command (`workhorse health`) is one more entry in
 * `rootCommand.subcommands`: a `CommandGroup` or a `RunnableCommand` from its own
 * `*.commands.ts`. Parsing, help, "unknown command" messages and test/cli/docs.test.ts (which
 * then asks for its section in docs/cli.md) all read this table.
 */
import type { CommandGroup, OptionSpec } from './command';
import { healthCommand } from './health.commands';
import { jobsCommands } from './jobs.commands';
import { queuesCommands } from './queues.commands';
import { changesCommand } from './changes.commands';
import { retentionCommands } from './retention.commands';
import { schedulesCommands } from './schedules.commands';
import { schemaCommands } from './schema.commands';
import { workersCommands } from './workers.commands';
import { waitsCommands } from './waits.commands';

/** Accepted by every command, also before the command's name (`workhorse --json jobs list`). */
export const COMMON_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'database-url',
    kind: 'string',
    valueName: 'URL',
    description: 'PostgreSQL connection URL (default: the DATABASE_URL environment variable).',
  },
  { name: 'json', kind: 'flag', description: 'Print one JSON document on stdout, for scripts.' },
  { name: 'help', short: 'h', kind: 'flag', description: 'Show help for the command.' },
  { name: 'version', kind: 'flag', description: 'Print the version of nestjs-workhorse.' },
];

export const rootCommand: CommandGroup = {
  name: 'workhorse',
  summary: 'Operate a nestjs-workhorse job queue inside PostgreSQL.',
  subcommands: [schemaCommands, jobsCommands, queuesCommands, schedulesCommands, workersCommands, healthCommand, retentionCommands, waitsCommands, changesCommand],
};
