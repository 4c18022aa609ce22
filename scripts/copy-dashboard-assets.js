#!/usr/bin/env node
'use strict';
// Copies the dashboard's stylesheet and script (lib/dashboard/assets/) into
// dist/lib/dashboard/assets/, where the built handler reads them, exactly as lib/dashboard/*.ts
// does in the repository. They are the dashboard's whole front end: no bundler, no CDN.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const from = path.join(root, 'lib', 'dashboard', 'assets');
const to = path.join(root, 'dist', 'lib', 'dashboard', 'assets');

const files = fs.readdirSync(from).filter((name) => /\.(css|js)$/.test(name)).sort();
if (files.length === 0) {
  console.error(`copy-dashboard-assets: no assets in ${from}`);
  process.exit(1);
}
fs.rmSync(to, { recursive: true, force: true });
fs.mkdirSync(to, { recursive: true });
for (const name of files) fs.copyFileSync(path.join(from, name), path.join(to, name));
console.error(`copy-dashboard-assets: copied ${files.length} file(s) to ${path.relative(root, to)}`);
