/**
 * The shape of a `workhorse` command: what help shows about it, what it accepts, and the
 * function that runs it. Groups (`workhorse jobs`) have subcommands and no `run`.
 */
import type { Pool } from 'pg';
import type { OptionSpec, ParsedArguments } from './argument-parser';
import type { ExitCode } from './cli.errors';
import type { Output } from './output';

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

export interface CommandSpec {
  name: string;
  /** One line, shown in the parent's list of commands. */
  summary: string;
  /** A paragraph at the top of the command's own help; defaults to the summary. */
  description?: string;
  /** Positional arguments, in order. */
  positionals?: readonly PositionalSpec[];
  /** The command's own options; the common ones (`--database-url`, `--json`, `--help`) come on top. */
  options?: readonly OptionSpec[];
  examples?: readonly string[];
  subcommands?: readonly CommandSpec[];
  run?: (context: CommandContext) => Promise<ExitCode>;
}
