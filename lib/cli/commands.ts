/**
 * The `workhorse` command tree, and the options every command accepts.
 */
import type { OptionSpec } from './argument-parser';
import type { CommandSpec } from './command';
import { jobsCommands } from './jobs.commands';
import { queuesCommands } from './queues.commands';
import { schemaCommands } from './schema.commands';

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
];

export const rootCommand: CommandSpec = {
  name: 'workhorse',
  summary: 'Operate a nestjs-workhorse job queue inside PostgreSQL.',
  subcommands: [schemaCommands, jobsCommands, queuesCommands],
};
