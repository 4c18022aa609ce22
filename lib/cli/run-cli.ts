/**
 * The whole of `workhorse` as one function: find the command, parse its arguments, open a
 * pool, run, report, and always end the pool, so the process can exit as soon as it is done.
 */
import { ConnectTimeoutError, WorkhorseError, WorkhorseValidationError } from '../core/errors';
import { CliError, CliUsageError, EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import { isGroup, type CommandSpec } from './command';
import { checkPositionals, parseArguments, resolveCommand } from './command-line';
import { COMMON_OPTIONS, rootCommand } from './commands';
import { checkDatabaseUrl, describeDatabaseError, describeTarget, messageOf, openPool } from './database-connection';
import { formatHelp } from './help';
import { Output, type CliIo } from './output';
import { packageVersion } from '../core/package-version';

function commandName(path: readonly CommandSpec[]): string {
  return path.map((command) => command.name).join(' ');
}

/** `--help` or `-h` anywhere before `--`: help wins over everything else on the line. */
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
    const rest = resolveCommand(argv, path, COMMON_OPTIONS);
    const command = path[path.length - 1];
    if (wantsHelp(rest)) {
      plain.text(formatHelp(path));
      return EXIT.ok;
    }
    const args = parseArguments(rest, [...(command.options ?? []), ...COMMON_OPTIONS], commandName(path));
    const output = new Output(io, args.flag('json'));
    if (args.flag('version')) {
      if (output.json) output.document({ version: packageVersion() });
      else output.text(packageVersion());
      return EXIT.ok;
    }
    if (isGroup(command)) {
      throw new CliUsageError(messages.missingCommand(commandName(path), command.subcommands.map((c) => c.name)));
    }
    checkPositionals(args, command.positionals ?? []);
    const given = args.string('database-url');
    const url = given ?? io.env.DATABASE_URL;
    if (!url) throw new CliUsageError(messages.noDatabase());
    checkDatabaseUrl(url, given === undefined ? 'DATABASE_URL' : '--database-url');

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
