/**
 * `workhorse schema install` and `workhorse schema status`: put the protocol's tables and
 * functions into a database, and say whether a database holds the version this package needs.
 */
import { getSchemaStatus, installSchema, type SchemaStatus } from '../core/schema';
import { EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandContext, CommandGroup } from './command';

/** `schema status --json` names the situation, so scripts need not compare numbers. */
type SchemaSituation = 'up-to-date' | 'not-installed' | 'older' | 'newer';

function situation(status: SchemaStatus): SchemaSituation {
  if (status.installed === null) return 'not-installed';
  if (status.upToDate) return 'up-to-date';
  return status.installed < status.expected ? 'older' : 'newer';
}

function describeStatus(status: SchemaStatus): string {
  if (status.installed === null) return messages.schemaAbsent();
  if (status.upToDate) return messages.schemaUpToDate(status.installed);
  return status.installed < status.expected
    ? messages.schemaOlder(status.installed, status.expected)
    : messages.schemaNewer(status.installed, status.expected);
}

async function status({ pool, output }: CommandContext): Promise<ExitCode> {
  const current = await getSchemaStatus(pool);
  if (output.json) output.document({ ...current, status: situation(current) });
  else output.text(describeStatus(current));
  return current.upToDate ? EXIT.ok : EXIT.schemaNotReady;
}

async function install({ pool, output }: CommandContext): Promise<ExitCode> {
  const before = await getSchemaStatus(pool);
  // Refuses another installed version (SchemaVersionMismatchError) without changing anything.
  await installSchema(pool);
  const changed = before.installed === null;
  if (output.json) {
    output.document({ installed: before.expected, expected: before.expected, upToDate: true, changed });
  } else {
    output.text(changed ? messages.schemaInstalled(before.expected) : messages.schemaAlreadyInstalled(before.expected));
  }
  return EXIT.ok;
}

export const schemaCommands: CommandGroup = {
  name: 'schema',
  summary: 'Install the workhorse schema, or check which version a database holds.',
  subcommands: [
    {
      name: 'install',
      summary: 'Install the workhorse schema (tables and SQL functions) if it is absent.',
      description:
        'Installs the workhorse schema (tables, indexes and the versioned SQL functions) into the database\n' +
        'if it is absent. Running it again does nothing; several installers at once take turns. A database\n' +
        'that holds another schema version is refused and left unchanged.',
      examples: ['DATABASE_URL=postgres://app@db:5432/app workhorse schema install', 'workhorse schema install --json'],
      run: install,
    },
    {
      name: 'status',
      summary: "Compare the database's schema version with this package's.",
      description:
        "Compares the schema version installed in the database with the version this package ships,\n" +
        'and says what to do if they differ. Changes nothing. Exits 0 when they match and 3 when the\n' +
        'schema is absent or another version, so deploy scripts can gate on it.',
      examples: ['workhorse schema status', 'workhorse schema status --json'],
      run: status,
    },
  ],
};
