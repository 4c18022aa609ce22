/**
 * The TypeScript client's SQL has one place: every statement the library sends is a constant of
 * lib/core/protocol/ (grouped by area), and so are the call helper and the one error mapper. This
 * reads every string and template literal of lib/ (with the TypeScript parser, so comments and
 * doc examples do not count) and fails on SQL text anywhere else. The exceptions are the schema
 * migrator's own install SQL and the transaction plumbing of the nestjs-cls adapter (its
 * SAVEPOINT names and isolation levels).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import * as ts from 'typescript';

const ROOT = resolve(__dirname, '..', '..');
const LIB = join(ROOT, 'lib');

/** Files allowed to write SQL text besides lib/core/protocol/, each with the reason. */
const ALLOWED: Record<string, string> = {
  'lib/core/schema-migrator.ts': 'the migrator installs and upgrades the schema itself',
  'lib/core/migration-steps.ts': 'reads the migration steps it installs',
  'lib/nestjs-cls/transactional-pg.adapter.ts': 'transaction plumbing of the nestjs-cls adapter',
};

// A literal that is SQL: it starts with a statement keyword, or calls a versioned workhorse function or reads a table.
const STATEMENT_START = /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|LISTEN|UNLISTEN|NOTIFY|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SET|DO|GRANT|REVOKE|CREATE|ALTER|DROP)\b/;
const WORKHORSE_CALL = /\bworkhorse\.[a-z_][a-z0-9_]*_v\d+\s*\(|\b(FROM|JOIN)\s+workhorse\./;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The SQL-looking string and template literals of one file, with their line numbers. */
export function sqlLiterals(path: string, text = readFileSync(path, 'utf8')): { line: number; text: string }[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: { line: number; text: string }[] = [];
  const visit = (node: ts.Node): void => {
    let literal: string | null = null;
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) literal = node.text;
    else if (ts.isTemplateExpression(node)) literal = node.head.text + node.templateSpans.map((span) => `\${} ${span.literal.text}`).join('');
    if (literal !== null && (STATEMENT_START.test(literal) || WORKHORSE_CALL.test(literal))) {
      found.push({ line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, text: literal.slice(0, 80) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('the TypeScript client sends SQL from lib/core/protocol/ only', () => {
  it('finds SQL text in no other file of lib/', () => {
    const outside = sourceFiles(LIB)
      .map((path) => relative(ROOT, path).split('\\').join('/'))
      .filter((path) => !path.startsWith('lib/core/protocol/') && ALLOWED[path] === undefined)
      .flatMap((path) => sqlLiterals(join(ROOT, path)).map((hit) => `${path}:${hit.line} ${hit.text}`));
    expect(outside).toEqual([]);
  });

  it('recognises SQL in a string, a template and a call, and not in a comment', () => {
    const sample = [
      "// client.query('BEGIN')",
      "const a = 'SELECT 1';",
      'const b = `SET LOCAL statement_timeout = ${ms}`;',
      "const c = 'x FROM workhorse.get_job_v1($1)';",
      "const d = 'Select a queue';",
    ].join('\n');
    expect(sqlLiterals('sample.ts', sample).map((hit) => hit.line)).toEqual([2, 3, 4]);
  });

  it('keeps every file of lib/core/protocol/ under 400 lines', () => {
    const long = sourceFiles(join(LIB, 'core', 'protocol')).filter((path) => readFileSync(path, 'utf8').split('\n').length > 400);
    expect(long).toEqual([]);
  });
});
