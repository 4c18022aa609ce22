/**
 * The `workhorse` command line as a library, for tests and for tools that embed it.
 *
 * @example
 * import { runCli } from './lib/cli';
 * process.exitCode = await runCli(['schema', 'status'], { stdout: process.stdout, stderr: process.stderr, env: process.env });
 */
export { EXIT, type ExitCode } from './cli.errors';
export type { CliIo, TextSink } from './output';
export { runCli } from './run-cli';
