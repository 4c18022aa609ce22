/**
 * lib/ has no import cycle, type-only imports included: modules that share types take them from
 * a leaf module (`claimed-job.ts`, `protocol/job-row.ts`, `cli/parsed-arguments.ts`, the
 * `ExecutionLane` a lane implements) instead of from each other. Reads every import and
 * re-export of lib/ with the TypeScript parser and fails on any strongly connected group.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import * as ts from 'typescript';

const ROOT = resolve(__dirname, '..', '..');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Each file's relative imports (and re-exports) of other files of `files`. */
function importGraph(files: readonly string[], read: (path: string) => string): Map<string, string[]> {
  const known = new Set(files);
  const target = (from: string, specifier: string): string | null => {
    if (!specifier.startsWith('.')) return null;
    const base = resolve(dirname(from), specifier);
    return [`${base}.ts`, join(base, 'index.ts')].find((candidate) => known.has(candidate)) ?? null;
  };
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const source = ts.createSourceFile(file, read(file), ts.ScriptTarget.Latest);
    const imports: string[] = [];
    for (const statement of source.statements) {
      if ((ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) && statement.moduleSpecifier && ts.isStringLiteral(statement.moduleSpecifier)) {
        const to = target(file, statement.moduleSpecifier.text);
        if (to !== null) imports.push(to);
      }
    }
    graph.set(file, imports);
  }
  return graph;
}

/** The groups of files that import each other (Tarjan's strongly connected components of size > 1). */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
      }
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) cycles.push(group.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

describe('lib/ has no import cycle', () => {
  it('finds none, type-only imports included', () => {
    const files = sourceFiles(join(ROOT, 'lib'));
    const cycles = cyclesOf(importGraph(files, (path) => readFileSync(path, 'utf8')));
    expect(cycles.map((group) => group.map((path) => relative(ROOT, path)))).toEqual([]);
  });

  it('finds a cycle of type-only imports', () => {
    const sources: Record<string, string> = {
      '/x/a.ts': "import type { B } from './b';\nexport interface A { b: B }",
      '/x/b.ts': "import type { A } from './a';\nexport interface B { a: A }",
      '/x/c.ts': "import type { A } from './a';",
    };
    expect(cyclesOf(importGraph(Object.keys(sources), (path) => sources[path]))).toEqual([['/x/a.ts', '/x/b.ts']]);
  });
});
