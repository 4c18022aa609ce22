// What a command's `run` reads of its command line: a leaf module (the command table and the
// parser both need it, and neither imports the other through it).

/** The option values parseArgs gave, by option name. */
export type Values = Readonly<Record<string, string | boolean | (string | boolean)[] | undefined>>;

/** The options and positional arguments of one command line. */
export class ParsedArguments {
  constructor(
    private readonly values: Values,
    readonly positionals: readonly string[],
  ) {}

  /** The option's value; the last one if it was given more than once. */
  string(name: string): string | undefined {
    const value = this.values[name];
    const last = Array.isArray(value) ? value[value.length - 1] : value;
    return typeof last === 'string' ? last : undefined;
  }

  /** Every value the option was given, in order; empty when absent. */
  list(name: string): readonly string[] {
    const value = this.values[name];
    return (Array.isArray(value) ? value : [value]).filter((v): v is string => typeof v === 'string');
  }

  /** Whether the option was given at all (a flag, or an option with a value). */
  flag(name: string): boolean {
    return this.values[name] !== undefined;
  }
}
