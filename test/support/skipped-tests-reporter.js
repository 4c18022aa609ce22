'use strict';
/**
 * A Jest reporter that ends every run with the tests it skipped, each with its full name. A test
 * that skips because the machine lacks something says what in its name (see
 * test/support/requirements.ts), so the reason is on screen, not only a count in the summary.
 */
class SkippedTestsReporter {
  onRunComplete(_contexts, results) {
    const skipped = [];
    for (const file of results.testResults) {
      for (const test of file.testResults) {
        if (test.status === 'pending' || test.status === 'skipped') skipped.push(test.fullName);
      }
    }
    if (skipped.length === 0) return;
    const lines = [...new Set(skipped)].map((name) => `  - ${name}`);
    process.stderr.write(`\nSkipped tests (${skipped.length}):\n${lines.join('\n')}\n`);
  }
}

module.exports = SkippedTestsReporter;
