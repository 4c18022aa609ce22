/**
 * The CLI's own refusals. Each carries the exit code the process ends with, so the one place
 * that reports errors (`runCli`) needs no knowledge of where they came from.
 */

/** Exit codes of `workhorse`, documented in docs/cli.md. */
export const EXIT = {
  ok: 0,
  /** The command ran and failed: database unreachable, job not found, refused by the schema. */
  failure: 1,
  /** The command line is wrong: unknown command or option, bad value, no database given. */
  usage: 2,
  /** `schema status` only: the check worked, and the schema is absent or another version. */
  schemaNotReady: 3,
  /** `health` only: the check worked, and the status is `warn`. */
  healthWarn: 4,
  /** `health` only: the check worked, and the status is `critical`. */
  healthCritical: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The command line cannot be understood; the report adds where to find the usage. */
export class CliUsageError extends CliError {
  constructor(message: string) {
    super(message, EXIT.usage);
  }
}
