#!/usr/bin/env node
'use strict';
// The `workhorse` executable. An installed package runs the compiled CLI in dist/. A source
// checkout without a build runs the TypeScript sources through a transpile-only require hook
// (no type check: `npm run typecheck` does that), using the `typescript` dev dependency.
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const built = path.join(root, 'dist', 'lib', 'cli', 'main.js');
const source = path.join(root, 'lib', 'cli', 'main.ts');

function cannotStart(reason) {
  process.stderr.write(
    `workhorse: cannot start: ${reason}. In a source checkout, run \`npm install\` and \`npm run build\` first.\n`,
  );
  process.exitCode = 1;
}

function typescriptVersion() {
  try {
    return require('typescript/package.json').version;
  } catch {
    return null;
  }
}

// Loading the compiler and transpiling costs seconds per run; the output of an unchanged file is
// kept under node_modules/.cache, keyed by a hash of everything that determines it, so only
// edited files are transpiled again and the compiler is loaded only when one is.
function registerTypeScript(version) {
  const libDir = fs.realpathSync(path.join(root, 'lib')) + path.sep;
  const cacheDir = path.join(root, 'node_modules', '.cache', 'workhorse-cli');
  const options = { module: 'commonjs', target: 'es2022', esModuleInterop: true, experimentalDecorators: true, emitDecoratorMetadata: true };
  let ts = null;

  function transpile(text, filename) {
    ts ??= require('typescript');
    const compilerOptions = ts.convertCompilerOptionsFromJson(options, root).options;
    return ts.transpileModule(text, { compilerOptions, fileName: filename }).outputText;
  }

  const previous = require.extensions['.ts'];
  require.extensions['.ts'] = (module, filename) => {
    // Only this package's sources (Node loads them by real path); other .ts files go to whoever
    // handled them before.
    if (!filename.startsWith(libDir) && previous) return previous(module, filename);
    const text = fs.readFileSync(filename, 'utf8');
    const key = crypto.createHash('sha256').update(`${version}\0${JSON.stringify(options)}\0${text}`).digest('hex');
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
}

if (fs.existsSync(built)) {
  require(built);
} else if (!fs.existsSync(source)) {
  cannotStart(`neither ${path.relative(root, built)} nor ${path.relative(root, source)} exists`);
} else {
  const version = typescriptVersion();
  if (version === null) {
    cannotStart(`${path.relative(root, built)} is missing and the "typescript" package is not installed to run the sources`);
  } else {
    registerTypeScript(version);
    require(source);
  }
}
