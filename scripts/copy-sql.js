#!/usr/bin/env node
'use strict';
// Copies sql/*.sql into dist/sql/, so that dist/lib/core/*.js finds the SQL at ../../sql,
// exactly as lib/core/*.ts does in the repository.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const from = path.join(root, 'sql');
const to = path.join(root, 'dist', 'sql');

const files = fs.readdirSync(from).filter((name) => name.endsWith('.sql')).sort();
if (files.length === 0) {
  console.error(`copy-sql: no .sql files in ${from}`);
  process.exit(1);
}
// Start from an empty dist/sql so a file removed from sql/ does not linger in the build.
fs.rmSync(to, { recursive: true, force: true });
fs.mkdirSync(to, { recursive: true });
for (const name of files) {
  fs.copyFileSync(path.join(from, name), path.join(to, name));
}
console.log(`copy-sql: copied ${files.length} file(s) to ${path.relative(root, to)}`);
