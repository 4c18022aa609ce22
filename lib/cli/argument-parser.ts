/**
 * A small, strict parser for one command's arguments: `--name value`, `--name=value`, flags,
 * repeatable options, `-h`, and `--` to end the options. Anything it does not know is refused
 * with a {@link CliUsageError}, so a typo never silently widens what a command does.
 */
import { CliUsageError } from './cli.errors';
import { messages } from './cli.messages';

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

/** The options and positional arguments of one command line. */
export class ParsedArguments {
  constructor(
    private readonly values: ReadonlyMap<string, readonly string[]>,
    readonly positionals: readonly string[],
  ) {}

  /** The option's value; the last one if it was given more than once. */
  string(name: string): string | undefined {
    const values = this.values.get(name);
    return values === undefined ? undefined : values[values.length - 1];
  }

  /** Every value the option was given, in order; empty when absent. */
  list(name: string): readonly string[] {
    return this.values.get(name) ?? [];
  }

  flag(name: string): boolean {
    return this.values.has(name);
  }
}

/**
 * Parses `tokens` against `specs`. `command` names the command in error messages, e.g.
 * `workhorse jobs list`.
 *
 * @example
 * const args = parseArguments(['--queue', 'emails', 'x'], [{ name: 'queue', kind: 'string', description: '' }], 'demo');
 * args.string('queue'); // 'emails'
 * args.positionals;     // ['x']
 */
export function parseArguments(tokens: readonly string[], specs: readonly OptionSpec[], command: string): ParsedArguments {
  const values = new Map<string, string[]>();
  const positionals: string[] = [];
  const add = (spec: OptionSpec, value: string): void => {
    const existing = values.get(spec.name);
    if (existing && spec.multiple) existing.push(value);
    else values.set(spec.name, [value]);
  };

  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i];
    if (token === '--') {
      positionals.push(...tokens.slice(i + 1));
      break;
    }
    if (!token.startsWith('-') || token === '-') {
      positionals.push(token);
      continue;
    }
    const equals = token.indexOf('=');
    const written = token.startsWith('--') && equals > 0 ? token.slice(0, equals) : token;
    const spec = findOption(written, specs);
    if (!spec) throw new CliUsageError(messages.unknownOption(written, command));
    if (spec.kind === 'flag') {
      if (written !== token) throw new CliUsageError(messages.optionTakesNoValue(written));
      add(spec, '');
      continue;
    }
    if (written !== token) {
      add(spec, token.slice(equals + 1));
      continue;
    }
    const next = tokens[i + 1];
    // A value that looks like another long option is far more often a forgotten value than a
    // deliberate one; `--reason=--x` still passes such a value.
    if (next === undefined || next.startsWith('--')) {
      throw new CliUsageError(messages.optionNeedsValue(written, spec.valueName ?? 'VALUE'));
    }
    add(spec, next);
    i++;
  }
  return new ParsedArguments(values, positionals);
}

/** The spec `token` (`--name` or `-x`) names, if any. */
export function findOption(token: string, specs: readonly OptionSpec[]): OptionSpec | undefined {
  if (token.startsWith('--')) return specs.find((spec) => spec.name === token.slice(2));
  if (token.length === 2) return specs.find((spec) => spec.short === token.slice(1));
  return undefined;
}
