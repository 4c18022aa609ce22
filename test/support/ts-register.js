// Lets a plain `node` child process load TypeScript files (test fixtures that tests start and
// kill): `node -r ./test/support/ts-register.js fixture.ts`. Transpile only, no type check; the
// test run itself type-checks through ts-jest.
const fs = require('node:fs');
const ts = require('typescript');

const { transpileOptions } = require('./ts-options');

const compilerOptions = { ...transpileOptions(ts), inlineSourceMap: true };

require.extensions['.ts'] = (module, filename) => {
  const source = fs.readFileSync(filename, 'utf8');
  const { outputText } = ts.transpileModule(source, { compilerOptions, fileName: filename });
  module._compile(outputText, filename);
};
