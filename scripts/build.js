#!/usr/bin/env node
'use strict';
// Builds the package into dist/, as `npm run build` and `npm pack` (prepack) do:
//  1. removes dist/, so a file deleted or renamed in lib/ never lingers in a published tarball;
//  2. compiles lib/ with tsconfig.build.json (JavaScript and declarations);
//  3. copies sql/*.sql and sql/migrations/*.sql into dist/sql/, where dist/lib/core/*.js finds
//     the SQL at ../../sql, exactly as lib/core/*.ts does in the repository. The tarball ships
//     the SQL only there;
//  4. copies sdk/protocol/limits.json (the protocol's limits and defaults) into
//     dist/sdk/protocol/, where dist/lib/core/limits.js finds it, as lib/core/limits.ts does.
// It writes nothing to stdout (tsc's diagnostics and its own line go to stderr), because as the
// prepack script its stdout would land inside the JSON that `npm pack --json` prints.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const dist = path.join(root, 'dist');
const from = path.join(root, 'sql');
const to = path.join(dist, 'sql');

fs.rmSync(dist, { recursive: true, force: true });

const tsc = require.resolve('typescript/bin/tsc', { paths: [root] });
try {
  execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { cwd: root, stdio: ['ignore', 2, 2] });
} catch (error) {
  // tsc has printed its diagnostics; a stack trace of this script would only hide them.
  process.exit(typeof error.status === 'number' && error.status !== 0 ? error.status : 1);
}

const sqlIn = (dir) => fs.readdirSync(dir).filter((name) => name.endsWith('.sql')).sort();
const files = sqlIn(from);
if (files.length === 0) {
  console.error(`build: no .sql files in ${from}`);
  process.exit(1);
}
fs.mkdirSync(to, { recursive: true });
for (const name of files) {
  fs.copyFileSync(path.join(from, name), path.join(to, name));
}
// The migration steps (sql/migrations/NNNN_<slug>.sql), which upgrade an installed schema.
const steps = fs.existsSync(path.join(from, 'migrations')) ? sqlIn(path.join(from, 'migrations')) : [];
fs.mkdirSync(path.join(to, 'migrations'), { recursive: true });
for (const name of steps) {
  fs.copyFileSync(path.join(from, 'migrations', name), path.join(to, 'migrations', name));
}
fs.mkdirSync(path.join(dist, 'sdk', 'protocol'), { recursive: true });
fs.copyFileSync(path.join(root, 'sdk', 'protocol', 'limits.json'), path.join(dist, 'sdk', 'protocol', 'limits.json'));
console.error(`build: compiled lib/ and copied ${files.length} SQL file(s) and ${steps.length} migration step(s) to ${path.relative(root, to)}`);
