#!/usr/bin/env node
'use strict';
// Runs a TypeScript file of this repository without a build step:
//
//   node scripts/run-ts.js sample-app/main.ts [args...]
//   node -r ./scripts/run-ts.js sample-app/main.ts      (the same, as a preload)
//
// It does two things a newcomer would otherwise need a build for:
//  - transpiles the repository's .ts files on the fly (transpile only: no type check, which is
//    `npm run typecheck`'s job), with decorator metadata, because Nest's dependency injection
//    reads constructor parameter types from it;
//  - resolves `nestjs-workhorse` and `nestjs-workhorse/*` to the sources in lib/, as the paths of
//    tsconfig.json do for the compiler, so the sample app imports the package the way a user
//    does and always runs the sources next to it (never a stale dist/).
//
// Transpiled output is cached under node_modules/.cache/workhorse-run-ts, keyed by a hash of the
// compiler version, the options, the file name and its text: only edited files are transpiled
// again, and the compiler is loaded only when one is. bin/workhorse.js loads this file to run the
// CLI from a source checkout that has no dist/.
const crypto = require('node:crypto');
const fs = require('node:fs');
const Module = require('node:module');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const PACKAGE_NAME = 'nestjs-workhorse';

function loadedTwice() {
  return require.extensions['.ts'] !== undefined && require.extensions['.ts'].workhorseRunTs === true;
}

function typescriptVersion() {
  try {
    return require('typescript/package.json').version;
  } catch {
    return null;
  }
}

function resolveInLib(subpath) {
  const base = path.join(root, 'lib', subpath);
  for (const candidate of [base, `${base}.ts`, path.join(base, 'index.ts')]) {
    try {
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // try the next form
    }
  }
  return null;
}

function registerPackageAlias() {
  const resolveFilename = Module._resolveFilename;
  Module._resolveFilename = function resolveWorkhorse(request, parent, isMain, options) {
    if (request === PACKAGE_NAME || request.startsWith(`${PACKAGE_NAME}/`)) {
      const subpath = request === PACKAGE_NAME ? 'index' : request.slice(PACKAGE_NAME.length + 1);
      const resolved = resolveInLib(subpath);
      if (resolved !== null) return resolved;
    }
    return resolveFilename.call(this, request, parent, isMain, options);
  };
}

function registerTranspiler(version) {
  const realRoot = fs.realpathSync(root) + path.sep;
  const nodeModules = path.join(realRoot, 'node_modules') + path.sep;
  const cacheDir = path.join(root, 'node_modules', '.cache', 'workhorse-run-ts');
  const options = {
    module: 'commonjs',
    target: 'es2022',
    esModuleInterop: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    inlineSourceMap: true,
    inlineSources: false,
  };
  let ts = null;

  function transpile(text, filename) {
    ts ??= require('typescript');
    const compilerOptions = ts.convertCompilerOptionsFromJson(options, root).options;
    return ts.transpileModule(text, { compilerOptions, fileName: filename }).outputText;
  }

  const previous = require.extensions['.ts'];
  const load = (module, filename) => {
    // Only this repository's sources; anything else goes to whoever handled .ts before.
    if ((!filename.startsWith(realRoot) || filename.startsWith(nodeModules)) && previous) {
      return previous(module, filename);
    }
    const text = fs.readFileSync(filename, 'utf8');
    const key = crypto
      .createHash('sha256')
      .update(`${version}\0${JSON.stringify(options)}\0${filename}\0${text}`)
      .digest('hex');
    const cached = path.join(cacheDir, `${key}.js`);
    let output;
    try {
      output = fs.readFileSync(cached, 'utf8');
    } catch {
      output = transpile(text, filename);
      try {
        fs.mkdirSync(cacheDir, { recursive: true });
        const partial = `${cached}.${process.pid}.tmp`;
        fs.writeFileSync(partial, output);
        fs.renameSync(partial, cached);
      } catch {
        // A read-only checkout still works, only slower.
      }
    }
    module._compile(output, filename);
  };
  load.workhorseRunTs = true;
  require.extensions['.ts'] = load;
}

function register() {
  if (loadedTwice()) return true;
  const version = typescriptVersion();
  if (version === null) {
    process.stderr.write('run-ts: the "typescript" package is not installed. Run `npm install` first.\n');
    return false;
  }
  // Stack traces point at the .ts lines, through the inline source maps.
  process.setSourceMapsEnabled(true);
  registerPackageAlias();
  registerTranspiler(version);
  return true;
}

if (require.main === module) {
  const [entry, ...rest] = process.argv.slice(2);
  if (entry === undefined) {
    process.stderr.write('usage: node scripts/run-ts.js FILE.ts [args...]\n');
    process.exitCode = 2;
  } else if (register()) {
    const file = path.resolve(entry);
    // The entry sees itself as the script, as with `node FILE`.
    process.argv = [process.argv[0], file, ...rest];
    require(file);
  } else {
    process.exitCode = 1;
  }
} else if (!register()) {
  process.exit(1);
}
