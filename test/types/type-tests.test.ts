/**
 * Type tests: every `*.types.ts` file in this folder is type-checked with the project's compiler
 * options and must give no diagnostic. Such a file marks each line that must NOT compile with
 * `// @ts-expect-error`, so a wrong payload or result that the types failed to reject leaves an
 * unused marker, which is an error, and so does any line that should compile and does not.
 */
import { readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import * as ts from 'typescript';

const ROOT = resolve(__dirname, '../..');
const FILES = readdirSync(__dirname)
  .filter((name) => name.endsWith('.types.ts'))
  .map((name) => join(__dirname, name));

function compilerOptions(): ts.CompilerOptions {
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, '\n'));
  return { ...ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT).options, noEmit: true };
}

describe('type tests', () => {
  let program: ts.Program;

  beforeAll(() => {
    program = ts.createProgram({ rootNames: FILES, options: compilerOptions() });
  }, 120_000);

  it('has type-test files', () => {
    expect(FILES.map((file) => relative(ROOT, file))).toContain('test/types/job-definition.types.ts');
  });

  it.each(FILES.map((file) => [relative(ROOT, file), file]))('%s compiles exactly where it should', (_name, file) => {
    const source = program.getSourceFile(file);
    expect(source).toBeDefined();
    const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)].map((d) => {
      const { line } = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : { line: -1 };
      return `${relative(ROOT, file)}:${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    expect(diagnostics).toEqual([]);
  });
});
