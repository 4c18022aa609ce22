#!/usr/bin/env node
'use strict';
// The `workhorse` executable. An installed package runs the compiled CLI in dist/. A source
// checkout without a build runs the TypeScript sources through scripts/run-ts.js (transpile
// only, cached under node_modules/.cache; `npm run typecheck` does the type check), which needs
// the `typescript` dev dependency.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const built = path.join(root, 'dist', 'lib', 'cli', 'main.js');
const source = path.join(root, 'lib', 'cli', 'main.ts');
const runTs = path.join(root, 'scripts', 'run-ts.js');

function cannotStart(reason) {
  process.stderr.write(
    `workhorse: cannot start: ${reason}. In a source checkout, run \`npm install\` and \`npm run build\` first.\n`,
  );
  process.exitCode = 1;
}

function hasTypeScript() {
  try {
    require.resolve('typescript/package.json');
    return true;
  } catch {
    return false;
  }
}

if (fs.existsSync(built)) {
  require(built);
} else if (!fs.existsSync(source) || !fs.existsSync(runTs)) {
  cannotStart(`neither ${path.relative(root, built)} nor the sources (${path.relative(root, source)}) exist`);
} else if (!hasTypeScript()) {
  cannotStart(`${path.relative(root, built)} is missing and the "typescript" package is not installed to run the sources`);
} else {
  require(runTs);
  require(source);
}
