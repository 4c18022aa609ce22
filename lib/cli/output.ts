/**
 * Where `workhorse` writes: reports to stdout (text for people, or exactly one JSON document
 * with `--json`), and every error as one line on stderr.
 */

/** Anything with a `write(text)`: `process.stdout`, or a buffer in tests. */
export interface TextSink {
  write(text: string): unknown;
}

/** What `runCli` reads and writes instead of touching `process` directly. */
export interface CliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: Readonly<Record<string, string | undefined>>;
}

export class Output {
  constructor(
    private readonly io: Pick<CliIo, 'stdout' | 'stderr'>,
    /** True when the user asked for `--json`. */
    readonly json: boolean,
  ) {}

  /** Writes a report for people; a trailing newline is added. */
  text(text: string): void {
    this.io.stdout.write(`${text}\n`);
  }

  /**
   * Writes `value` as one JSON document. Dates become ISO 8601 strings (UTC), as
   * `JSON.stringify` writes them.
   */
  document(value: unknown): void {
    this.io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  /** Writes `message` to stderr as one line, prefixed with the program name. */
  error(message: string): void {
    this.io.stderr.write(`workhorse: ${oneLine(message)}\n`);
  }
}

/** Folds a message onto one line, so that each error is exactly one line of stderr. */
export function oneLine(message: string): string {
  return message.replace(/\s*[\r\n]+\s*/g, ' ').trim();
}
