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

  /**
   * Writes a report for people; a trailing newline is added. Control characters other than the
   * report's own line breaks are written escaped (see {@link escapeControls}).
   */
  text(text: string): void {
    this.io.stdout.write(`${escapeControls(text)}\n`);
  }

  /**
   * Writes `value` as one JSON document. Dates become ISO 8601 strings (UTC), as
   * `JSON.stringify` writes them.
   */
  document(value: unknown): void {
    this.io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  /** Writes `message` to stderr as one line, prefixed with the program name, controls escaped. */
  error(message: string): void {
    this.io.stderr.write(`workhorse: ${escapeControls(oneLine(message))}\n`);
  }
}

// C0 controls but the line feed, DEL, C1 controls (U+009B is a one-character CSI), and the
// invisible marks that reorder or hide text (bidirectional overrides and isolates).
const CONTROLS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text from the database (error messages, tags, actors, reasons, worker ids) with every control
 * character but the line feed written as `\uXXXX`, so that nothing stored can move the cursor,
 * clear or retitle the operator's terminal, or reorder what is shown. `--json` needs no such
 * step: JSON.stringify escapes C0 controls, and a JSON document is read by programs.
 */
export function escapeControls(text: string): string {
  return text.replace(CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** {@link escapeControls}, and the line feed too: for text that must stay on one line (a table cell). */
export function printable(text: string): string {
  return escapeControls(text).replace(/\n/g, '\\n');
}

/** Folds a message onto one line, so that each error is exactly one line of stderr. */
export function oneLine(message: string): string {
  return message.replace(/\s*[\r\n]+\s*/g, ' ').trim();
}
