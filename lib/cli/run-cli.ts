/**
 * The whole of `workhorse` as one function: find the command, parse its arguments, open a
 * pool, run, report, and always end the pool, so the process can exit as soon as it is done.
 */
import { ConnectTimeoutError, WorkhorseError, WorkhorseValidationError } from '../core/errors';
import { findOption, parseArguments } from './argument-parser';
import { CliError, CliUsageError, EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandSpec } from './command';
import { COMMON_OPTIONS, rootCommand } from './commands';
import { checkDatabaseUrl, describeDatabaseError, describeTarget, messageOf, openPool } from './database-connection';
import { formatHelp } from './help';
import { Output, type CliIo } from './output';

function commandName(path: readonly CommandSpec[]): string {
  return path.map((command) => command.name).join(' ');
}

/**
 * Walks `argv` down the command tree, appending each command word to `path`, and returns the
 * remaining tokens for the last command's parser. Before the last command's name only the
 * common options may appear.
 */
function resolveCommand(argv: readonly string[], path: CommandSpec[]): string[] {
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i];
    const subcommands = path[path.length - 1].subcommands;
    if (!subcommands || token === '--') {
      rest.push(...argv.slice(i));
      break;
    }
    if (token.startsWith('-') && token !== '-') {
      const written = token.startsWith('--') && token.includes('=') ? token.slice(0, token.indexOf('=')) : token;
      const option = findOption(written, COMMON_OPTIONS);
      if (!option) throw new CliUsageError(messages.unknownOption(written, commandName(path)));
      rest.push(token);
      if (option.kind === 'string' && written === token && i + 1 < argv.length) rest.push(argv[++i]);
      continue;
    }
    const next = subcommands.find((command) => command.name === token);
    if (!next) {
      throw new CliUsageError(messages.unknownCommand(token, commandName(path), subcommands.map((c) => c.name)));
    }
    path.push(next);
  }
  return rest;
}

function wantsHelp(tokens: readonly string[]): boolean {
  const end = tokens.indexOf('--');
  return (end === -1 ? tokens : tokens.slice(0, end)).some((token) => token === '--help' || token === '-h');
}

function report(error: unknown, output: Output, path: readonly CommandSpec[], target: string | null): ExitCode {
  if (error instanceof CliUsageError) {
    output.error(`${error.message} ${messages.usageHint(commandName(path))}`);
    return EXIT.usage;
  }
  if (error instanceof CliError) {
    output.error(error.message);
    return error.exitCode;
  }
  // Admin's checks (ids, names, limits, cursors): the input is wrong, as with a bad option.
  if (error instanceof WorkhorseValidationError) {
    output.error(error.message);
    return EXIT.usage;
  }
  // A connect timeout is said the CLI's way, below, like every other failure to connect.
  if (error instanceof WorkhorseError && !(error instanceof ConnectTimeoutError)) {
    output.error(error.message);
    return EXIT.failure;
  }
  const described = target === null ? null : describeDatabaseError(error, target);
  output.error(described ?? messages.unexpected(messageOf(error)));
  return EXIT.failure;
}

/**
 * Runs `workhorse` with the arguments after the program name and returns the exit code. It
 * never throws: every failure is written to `io.stderr` as one line. Tests call it in-process;
 * `main.ts` calls it with `process` values.
 *
 * @example
 * const code = await runCli(['jobs', 'get', id, '--json'], { stdout: process.stdout, stderr: process.stderr, env: process.env });
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const path: CommandSpec[] = [rootCommand];
  const plain = new Output(io, false);
  try {
    const rest = resolveCommand(argv, path);
    const command = path[path.length - 1];
    if (wantsHelp(rest)) {
      plain.text(formatHelp(path));
      return EXIT.ok;
    }
    const args = parseArguments(rest, [...(command.options ?? []), ...COMMON_OPTIONS], commandName(path));
    if (!command.run) {
      throw new CliUsageError(messages.missingCommand(commandName(path), (command.subcommands ?? []).map((c) => c.name)));
    }
    const expected = command.positionals ?? [];
    const required = expected.filter((positional) => !positional.optional).length;
    if (args.positionals.length < required) {
      throw new CliUsageError(messages.missingArgument(expected[args.positionals.length].name));
    }
    if (args.positionals.length > expected.length) {
      throw new CliUsageError(messages.unexpectedArgument(args.positionals[expected.length]));
    }
    const given = args.string('database-url');
    const url = given ?? io.env.DATABASE_URL;
    if (!url) throw new CliUsageError(messages.noDatabase());
    checkDatabaseUrl(url, given === undefined ? 'DATABASE_URL' : '--database-url');

    const output = new Output(io, args.flag('json'));
    const pool = openPool(url);
    try {
      return await command.run({ args, pool, output });
    } catch (error) {
      return report(error, output, path, describeTarget(url));
    } finally {
      await pool.end().catch(() => undefined);
    }
  } catch (error) {
    return report(error, plain, path, null);
  }
}
