/**
 * Help texts, rendered from the command table that the parser reads too (util.parseArgs parses
 * but writes no help), so help cannot drift from what a command accepts.
 */
import { isGroup, type CommandGroup, type CommandSpec, type OptionSpec } from './command';
import { COMMON_OPTIONS } from './commands';
import { formatColumns } from './format';

const INDENT = '  ';

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => (line ? INDENT + line : line))
    .join('\n');
}

function optionRows(options: readonly OptionSpec[]): string[][] {
  return options.map((option) => {
    const long = `--${option.name}${option.kind === 'string' ? ` ${option.valueName ?? 'VALUE'}` : ''}`;
    return [option.short ? `-${option.short}, ${long}` : long, option.description];
  });
}

function usageWords(command: CommandSpec): string {
  return (command.positionals ?? []).map((p) => (p.optional ? `[${p.name}]` : p.name)).join(' ');
}

/** Every runnable command under `group`, as `[words after the group's name, summary]`. */
function leaves(group: CommandGroup, prefix: string[] = []): string[][] {
  return group.subcommands.flatMap((sub) => {
    const words = [...prefix, sub.name];
    if (isGroup(sub)) return leaves(sub, words);
    return [[[...words, usageWords(sub)].filter(Boolean).join(' '), sub.summary]];
  });
}

const EXIT_CODES = [
  ['0', 'success'],
  ['1', 'the command failed: database unreachable, job not found or not a dead letter, schema refused'],
  ['2', 'bad command line or input: unknown command or option, invalid id or value, no database given'],
  ['3', '`schema status` only: the schema is absent or another version'],
];

/**
 * The help of the command at the end of `path` (root first), e.g. `[root, jobs, list]` for
 * `workhorse jobs list --help`.
 */
export function formatHelp(path: readonly CommandSpec[]): string {
  const command = path[path.length - 1];
  const name = path.map((c) => c.name).join(' ');
  const isRoot = path.length === 1;
  const sections: string[] = [];

  if (isGroup(command)) {
    sections.push(`Usage: ${name} <command> [options]`);
    sections.push(command.description ?? command.summary);
    sections.push(`Commands:\n${indent(formatColumns(leaves(command)))}`);
  } else {
    sections.push(`Usage: ${[name, usageWords(command), '[options]'].filter(Boolean).join(' ')}`);
    sections.push(command.description ?? command.summary);
    if (command.positionals?.length) {
      sections.push(`Arguments:\n${indent(formatColumns(command.positionals.map((p) => [p.name, p.description])))}`);
    }
    if (command.options?.length) sections.push(`Options:\n${indent(formatColumns(optionRows(command.options)))}`);
  }
  sections.push(`Common options:\n${indent(formatColumns(optionRows(COMMON_OPTIONS)))}`);
  if (command.examples?.length) sections.push(`Examples:\n${indent(command.examples.join('\n'))}`);
  if (isRoot) {
    sections.push(
      'Environment:\n' +
        indent(
          formatColumns([
            ['DATABASE_URL', 'PostgreSQL connection URL, e.g. postgres://user:password@host:5432/db.\n--database-url takes precedence over it.'],
          ]),
        ),
    );
    sections.push(`Exit codes:\n${indent(formatColumns(EXIT_CODES))}`);
  }
  if (isGroup(command)) sections.push(`Run \`${name} <command> --help\` for a command's arguments and options.`);
  return sections.join('\n\n');
}
