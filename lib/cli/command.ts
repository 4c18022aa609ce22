/**
 * The shape of the `workhorse` command table: a command is a declarative entry (what help shows
 * about it, what it accepts, the function that runs it), and a group is a named list of
 * commands. The parser (command-line.ts) and the help (help.ts) both read the table, so they
 * cannot disagree about what a command accepts.
 */
import type { Pool } from 'pg';
import type { ExitCode } from './cli.errors';
import type { ParsedArguments } from './parsed-arguments';
import type { Output } from './output';

export interface OptionSpec {
  /** The long name without dashes: `queue` for `--queue`. */
  name: string;
  /** `string` options take a value; `flag` options take none. */
  kind: 'string' | 'flag';
  /** Whether the option may be given more than once (its values are collected in order). */
  multiple?: boolean;
  /** One letter for a `-x` form. */
  short?: string;
  /** How help shows the value: `--queue Q`. */
  valueName?: string;
  /** One line for the help text. */
  description: string;
}

export interface PositionalSpec {
  /** As help shows it: `ID`. */
  name: string;
  description: string;
  /** May be left out (help shows `[ID]`); optional positionals come after the required ones. */
  optional?: boolean;
}

/** What a command's `run` gets. */
export interface CommandContext {
  args: ParsedArguments;
  /** A pool on the chosen database; `runCli` ends it when `run` returns. */
  pool: Pool;
  output: Output;
}

interface CommandInfo {
  /** The word that names it on the command line. */
  name: string;
  /** One line, shown in the parent's list of commands. */
  summary: string;
  /** A paragraph at the top of the command's own help; defaults to the summary. */
  description?: string;
  examples?: readonly string[];
}

/** A command that runs: `workhorse jobs get ID`. */
export interface RunnableCommand extends CommandInfo {
  /** Positional arguments, in order. */
  positionals?: readonly PositionalSpec[];
  /** The command's own options; the common ones (`--database-url`, `--json`, `--help`, `--version`) come on top. */
  options?: readonly OptionSpec[];
  run(context: CommandContext): Promise<ExitCode>;
  subcommands?: never;
}

/**
 * A group of commands: `workhorse jobs`. A new group (or a new command) is one entry in its
 * parent's `subcommands`; help, the list of commands in messages and the parser follow.
 */
export interface CommandGroup extends CommandInfo {
  subcommands: readonly CommandSpec[];
  run?: never;
  positionals?: never;
  options?: never;
}

export type CommandSpec = RunnableCommand | CommandGroup;

export function isGroup(command: CommandSpec): command is CommandGroup {
  return command.subcommands !== undefined;
}
