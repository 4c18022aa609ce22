/**
 * The `workhorse` executable: `bin/workhorse.js` loads this file, which runs the CLI with the
 * process's arguments, streams and environment, and leaves the exit code to Node.
 */
import { runCli } from './run-cli';

// `workhorse jobs list | head` closes stdout early; that is the reader's choice, not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(process.exitCode ?? 0);
});

runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }).then(
  (code) => {
    // exitCode, not exit(): Node finishes writing a piped stdout before it ends.
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`workhorse: ${String(error)}\n`);
    process.exitCode = 1;
  },
);
