#!/usr/bin/env node
'use strict';
// Copies the repository's sql/ tree (the top-level files of the full schema and the numbered
// steps of sql/migrations/) into the two SDKs that ship it inside their packages:
//   sdk/python/src/workhorse/sql/  (package data of the wheel)
//   sdk/go/sql/                    (embedded by `//go:embed sql`)
// Each target is emptied first, so a file deleted or renamed in sql/ never lingers in an SDK.
// It also copies sdk/protocol/limits.json (the protocol's limits and defaults) to
//   sdk/python/src/workhorse/limits.json  (package data)
//   sdk/go/limits.json                    (embedded by `//go:embed limits.json`)
// Run it after every change to sql/ or limits.json; the SDKs' tests, test/package/sdk-sql.test.ts
// and test/package/limits.test.ts fail while a copy differs from its source.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const source = path.join(root, 'sql');
const targets = [path.join(root, 'sdk', 'python', 'src', 'workhorse', 'sql'), path.join(root, 'sdk', 'go', 'sql')];

/** The .sql files under dir, as paths relative to it with / separators, in name order. */
function sqlFiles(dir, prefix = '') {
  const found = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    if (entry.isDirectory()) found.push(...sqlFiles(path.join(dir, entry.name), `${prefix}${entry.name}/`));
    else if (entry.isFile() && entry.name.endsWith('.sql')) found.push(`${prefix}${entry.name}`);
  }
  return found;
}

const files = sqlFiles(source);
if (files.length === 0) {
  console.error(`copy-sdk-sql: no .sql files in ${source}`);
  process.exit(1);
}
for (const target of targets) {
  fs.rmSync(target, { recursive: true, force: true });
  for (const file of files) {
    const to = path.join(target, ...file.split('/'));
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(path.join(source, ...file.split('/')), to);
  }
  console.error(`copy-sdk-sql: copied ${files.length} file(s) to ${path.relative(root, target)}`);
}

const limits = path.join(root, 'sdk', 'protocol', 'limits.json');
if (!fs.existsSync(limits)) {
  console.error(`copy-sdk-sql: no ${path.relative(root, limits)}`);
  process.exit(1);
}
for (const to of [path.join(root, 'sdk', 'python', 'src', 'workhorse', 'limits.json'), path.join(root, 'sdk', 'go', 'limits.json')]) {
  fs.copyFileSync(limits, to);
  console.error(`copy-sdk-sql: copied limits.json to ${path.relative(root, to)}`);
}
