// The transpile-only TypeScript options shared by test/support/ts-register.js (child processes
// the tests start) and the benchmark's transpiled copy of lib/ (test/bench/lib/transpile.js).
function transpileOptions(ts) {
  return {
    module: ts.ModuleKind.CommonJS,
    target: ts.ScriptTarget.ES2022,
    esModuleInterop: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    sourceMap: false,
  };
}

module.exports = { transpileOptions };
