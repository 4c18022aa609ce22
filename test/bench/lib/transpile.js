'use strict';
/**
 * Transpiles `lib/**\/*.ts` once, into a temporary directory, for the worker child processes.
 *
 * The children could load the TypeScript sources through test/support/ts-register.js, but then
 * every child would carry the TypeScript compiler (tens of MiB) and would spend its first
 * second compiling: both would be charged to our worker's RSS and start-up and not to the
 * peers', which ship JavaScript. This is the same transpilation ts-register does (transpile
 * only, same options), done once and up front; it needs no build of the project.
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { transpileOptions } = require('../../support/ts-options');

const ROOT = path.resolve(__dirname, '..', '..', '..');

function listTs(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listTs(full));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

/**
 * Returns { dir, remove }: `dir/lib/...` holds the JavaScript, `dir/package.json` is the tree's, `dir/sql` (and `dir/sdk/protocol`) link to the tree's and
 * `dir/node_modules` to the checkout's, so `require('pg')` and the schema's SQL_DIR resolve as
 * in the source tree. `root` is the checkout by default, or another tree of the project (a
 * commit to compare with, see compare.js).
 */
function transpileLib(root = ROOT) {
  const ts = require('typescript');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'workhorse-bench-lib-'));
  const compilerOptions = transpileOptions(ts);
  for (const file of listTs(path.join(root, 'lib'))) {
    const rel = path.relative(root, file);
    const { outputText } = ts.transpileModule(fs.readFileSync(file, 'utf8'), { compilerOptions, fileName: file });
    const target = path.join(dir, rel.replace(/\.ts$/, '.js'));
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, outputText);
  }
  fs.symlinkSync(path.join(root, 'sql'), path.join(dir, 'sql'));
  // The protocol's limits (lib/core/limits.ts reads sdk/protocol/limits.json), where the tree has them.
  if (fs.existsSync(path.join(root, 'sdk', 'protocol'))) {
    fs.mkdirSync(path.join(dir, 'sdk'));
    fs.symlinkSync(path.join(root, 'sdk', 'protocol'), path.join(dir, 'sdk', 'protocol'));
  }
  // The package's version is read from its package.json (some commits' workers need it to start).
  fs.copyFileSync(path.join(root, 'package.json'), path.join(dir, 'package.json'));
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  return { dir, remove };
}

module.exports = { transpileLib, ROOT };
