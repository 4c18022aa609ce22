/**
 * Reading a `workhorse` command line against the command table. Node's `util.parseArgs` splits
 * it into options, values and positionals (`--name value`, `--name=value`, flags, repeatable
 * options, `-h`, `--` ending the options); this file turns what parseArgs allows but the table
 * does not into a {@link CliUsageError} in our words, so a typo never silently widens what a
 * command does, and every message names the command whose `--help` to read.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CliUsageError } from './cli.errors';
import { messages } from './cli.messages';
import { isGroup, type CommandSpec, type OptionSpec, type PositionalSpec } from './command';
import { ParsedArguments, type Values } from './parsed-arguments';

export { ParsedArguments };

type Token = NonNullable<ReturnType<typeof parseArgs>['tokens']>[number];
type OptionToken = Extract<Token, { kind: 'option' }>;

function commandName(path: readonly CommandSpec[]): string {
  return path.map((command) => command.name).join(' ');
}

/** The tokens of `argv` as parseArgs reads them with `specs`; nothing is refused yet. */
function tokenize(argv: readonly string[], specs: readonly OptionSpec[]): { tokens: Token[]; values: Values; positionals: string[] } {
  const options: NonNullable<ParseArgsConfig['options']> = {};
  for (const spec of specs) {
    options[spec.name] = {
      type: spec.kind === 'flag' ? 'boolean' : 'string',
      ...(spec.multiple && { multiple: true }),
      ...(spec.short !== undefined && { short: spec.short }),
    };
  }
  // Not strict: parseArgs would refuse in its own words; ours name the command and its help.
  const { tokens, values, positionals } = parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true });
  return { tokens, values, positionals };
}

/** The spec the option token names (`--name` or `-x`), if any. */
function specOf(token: OptionToken, specs: readonly OptionSpec[]): OptionSpec | undefined {
  return specs.find((spec) => token.rawName === `--${spec.name}` || (spec.short !== undefined && token.rawName === `-${spec.short}`));
}

/** Refuses an option `specs` does not know, a flag with a value, and an option without one. */
function checkOption(token: OptionToken, specs: readonly OptionSpec[], command: string): OptionSpec {
  const spec = specOf(token, specs);
  if (!spec) throw new CliUsageError(messages.unknownOption(token.rawName, command));
  if (spec.kind === 'flag') {
    if (token.value !== undefined) throw new CliUsageError(messages.optionTakesNoValue(token.rawName));
    return spec;
  }
  // A separate value that looks like another long option is far more often a forgotten value
  // than a deliberate one; `--reason=--x` still passes such a value.
  if (token.value === undefined || (token.inlineValue === false && token.value.startsWith('--'))) {
    throw new CliUsageError(messages.optionNeedsValue(token.rawName, spec.valueName ?? 'VALUE'));
  }
  return spec;
}

/**
 * Walks `argv` down the command tree from `path`'s last command, appending each command word to
 * `path`, and returns the tokens for the last command's own parse: the common options given
 * before its name, then everything after it. Before the last command's name only `common`
 * options may appear.
 */
export function resolveCommand(argv: readonly string[], path: CommandSpec[], common: readonly OptionSpec[]): string[] {
  const { tokens } = tokenize(argv, common);
  const before: string[] = [];
  let taken = -1;
  for (const token of tokens) {
    const current = path[path.length - 1];
    if (!isGroup(current) || token.kind === 'option-terminator') return [...before, ...argv.slice(token.index)];
    if (token.kind === 'option') {
      if (!specOf(token, common)) throw new CliUsageError(messages.unknownOption(token.rawName, commandName(path)));
      // Its value, if any, is checked by the command's own parse; `-xy` gives two tokens of one word.
      if (token.index > taken) {
        taken = token.inlineValue === false ? token.index + 1 : token.index;
        before.push(...argv.slice(token.index, taken + 1));
      }
      continue;
    }
    const next = current.subcommands.find((command) => command.name === token.value);
    if (!next) {
      throw new CliUsageError(messages.unknownCommand(token.value, commandName(path), current.subcommands.map((c) => c.name)));
    }
    path.push(next);
    taken = token.index;
  }
  return before;
}

/**
 * Parses one command's `tokens` against `specs`. `command` names the command in error messages,
 * e.g. `workhorse jobs list`.
 *
 * @example
 * const args = parseArguments(['--queue', 'emails', 'x'], [{ name: 'queue', kind: 'string', description: '' }], 'demo');
 * args.string('queue'); // 'emails'
 * args.positionals;     // ['x']
 */
export function parseArguments(tokens: readonly string[], specs: readonly OptionSpec[], command: string): ParsedArguments {
  const parsed = tokenize(tokens, specs);
  for (const token of parsed.tokens) {
    if (token.kind === 'option') checkOption(token, specs, command);
  }
  return new ParsedArguments(parsed.values, parsed.positionals);
}

/** Refuses a missing required positional argument, and one more than `expected` names. */
export function checkPositionals(args: ParsedArguments, expected: readonly PositionalSpec[]): void {
  const required = expected.filter((positional) => !positional.optional).length;
  if (args.positionals.length < required) throw new CliUsageError(messages.missingArgument(expected[args.positionals.length].name));
  if (args.positionals.length > expected.length) throw new CliUsageError(messages.unexpectedArgument(args.positionals[expected.length]));
}
