/**
 * The README stays true to the code: every ```ts block of README.md (and of docs/workers.md,
 * docs/testing.md, docs/integrations.md, docs/dashboard.md, docs/security.md, docs/operations.md,
 * docs/orchestration.md, docs/schedules.md and docs/upgrading.md) is
 * type-checked with the TypeScript compiler, with `nestjs-workhorse` resolving to lib/ through
 * the paths of tsconfig.json, and any diagnostic fails. Besides, the two newcomer commands stand
 * near the top, every `npm run` script the documents mention exists, and every relative link
 * points at a file that exists.
 *
 * Each block is a module of its own. A block whose first line is a comment naming a file
 * (`// src/app.module.ts`) becomes that file, so blocks can import each other the way the files
 * of an application do. Names a block takes from its surroundings (your own providers, an
 * existing pool) are declared by PRELUDE below.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import * as ts from 'typescript';
import { fencedBlocks as blocksOf, namedFile, type Block } from './support/markdown';

const ROOT = resolve(__dirname, '..');
const fencedBlocks = (document: string): Block[] => blocksOf(ROOT, document);
const CHECKED_DOCUMENTS = ['README.md', 'docs/workers.md', 'docs/nest.md', 'docs/durable-execution.md', 'docs/deduplication.md', 'docs/testing.md', 'docs/integrations.md', 'docs/dashboard.md', 'docs/security.md', 'docs/operations.md', 'docs/orchestration.md', 'docs/schedules.md', 'docs/upgrading.md'];
/** Every document: README.md, docs/ and docs/benchmarks/, and the SDKs' own. */
const LINKED_DOCUMENTS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`),
  ...readdirSync(join(ROOT, 'docs', 'benchmarks')).filter((name) => name.endsWith('.md')).map((name) => `docs/benchmarks/${name}`),
  'sdk/conformance/README.md',
  'sdk/python/README.md',
  'sdk/go/README.md',
].sort();
/** Where the blocks live, virtually: inside the repository, so node_modules and paths resolve. */
const VIRTUAL_ROOT = join(ROOT, '.readme-blocks');

/**
 * What the examples may use without defining it: stand-ins for the reader's own code. Keep it
 * small; an example that needs more should define it.
 */
const PRELUDE = `
declare class PaymentsClient {
  charge(orderId: string, options: { idempotencyKey: string }): Promise<{ chargeId: string }>;
}
declare class LabelsClient {
  print(orderId: string, options: { idempotencyKey: string }): Promise<{ labelId: string }>;
}
declare const payments: PaymentsClient;
declare const labels: LabelsClient;
declare const orderId: string;
declare const jobId: string;
declare class OrderHandlers {}
declare class OrderService {
  placeOrder(orderId: string): Promise<void>;
}
`;

/**
 * Modules the examples import from the reader's project, by their path under a document's
 * blocks: the Prisma Client that the reader generates stands in as the one the Prisma tests
 * generate (test/integrations/prisma/schema.prisma, model Order on the table orders).
 */
const STAND_IN_MODULES: Record<string, string> = {
  'src/generated/prisma/client.ts': `export * from '${join(ROOT, 'test/integrations/prisma/generated/client')}';`,
};

/** Where the blocks of one document live. */
function documentRoot(document: string): string {
  return join(VIRTUAL_ROOT, document.replace(/[^\w]+/g, '-'));
}

/** The block's file: the one its first-line comment names, or one named after its place. */
function virtualPath(block: Block): string {
  const named = namedFile(block);
  const base = documentRoot(block.document);
  return named ? join(base, named) : join(base, `line-${block.line}.ts`);
}

function compilerOptions(): ts.CompilerOptions {
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, '\n'));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  return {
    ...parsed.options,
    // ES modules, so that examples may use top-level await as README snippets do.
    module: ts.ModuleKind.ES2022,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    noEmit: true,
    sourceMap: false,
    declaration: false,
  };
}

interface Checked {
  program: ts.Program;
  files: Map<string, Block>;
}

function checkBlocks(blocks: Block[]): Checked {
  const files = new Map<string, Block>();
  const sources = new Map<string, string>();
  for (const block of blocks) {
    const path = virtualPath(block);
    if (files.has(path)) throw new Error(`${block.document}:${block.line}: two blocks are named ${relative(VIRTUAL_ROOT, path)}`);
    files.set(path, block);
    // `export {}` makes a block without imports a module too, so blocks never share top-level names.
    sources.set(path, `${block.code}\nexport {};\n`);
  }
  const prelude = join(VIRTUAL_ROOT, 'prelude.d.ts');
  sources.set(prelude, PRELUDE);
  for (const document of new Set(blocks.map((block) => block.document))) {
    for (const [path, text] of Object.entries(STAND_IN_MODULES)) sources.set(join(documentRoot(document), path), text);
  }

  const options = compilerOptions();
  const host = ts.createCompilerHost(options);
  const virtualDirectories = new Set<string>();
  for (const path of sources.keys()) {
    for (let dir = dirname(path); dir.startsWith(VIRTUAL_ROOT); dir = dirname(dir)) virtualDirectories.add(dir);
  }
  const { getSourceFile, fileExists, readFile, directoryExists } = host;
  host.getSourceFile = (fileName, languageVersion, onError, shouldCreate) => {
    const text = sources.get(fileName);
    return text === undefined
      ? getSourceFile.call(host, fileName, languageVersion, onError, shouldCreate)
      : ts.createSourceFile(fileName, text, languageVersion, true);
  };
  host.fileExists = (fileName) => sources.has(fileName) || fileExists.call(host, fileName);
  host.readFile = (fileName) => sources.get(fileName) ?? readFile.call(host, fileName);
  host.directoryExists = (dir) => virtualDirectories.has(dir) || (directoryExists?.call(host, dir) ?? ts.sys.directoryExists(dir));

  const program = ts.createProgram({ rootNames: [...sources.keys()], options, host });
  return { program, files };
}

function describeDiagnostic(diagnostic: ts.Diagnostic, files: Map<string, Block>): string {
  const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
  if (!diagnostic.file || diagnostic.start === undefined) return message;
  const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
  const block = files.get(diagnostic.file.fileName);
  const where = block
    ? `${block.document}:${block.line + line}:${character + 1}`
    : `${relative(ROOT, diagnostic.file.fileName)}:${line + 1}:${character + 1}`;
  return `${where}: ${message}`;
}

describe('README.md', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');

  it('puts the two newcomer commands near the top', () => {
    const top = readme.split('\n').slice(0, 30);
    expect(top).toContain('npm install && npm run demo');
    expect(top).toContain('npm install && npm test');
  });

  it('has TypeScript examples, all in ```ts blocks that this file checks', () => {
    const blocks = CHECKED_DOCUMENTS.flatMap(fencedBlocks);
    expect(blocks.filter((block) => block.document === 'README.md' && block.language === 'ts').length).toBeGreaterThanOrEqual(5);
    const unchecked = blocks.filter((block) => ['typescript', 'tsx', 'js', 'javascript', 'mts', 'cts'].includes(block.language));
    expect(unchecked.map((block) => `${block.document}:${block.line} (${block.language})`)).toEqual([]);
  });
});

describe('TypeScript examples of the documents', () => {
  const blocks = CHECKED_DOCUMENTS.flatMap(fencedBlocks).filter((block) => block.language === 'ts');
  let checked: Checked;

  beforeAll(() => {
    checked = checkBlocks(blocks);
  }, 120_000);

  it('compile with the compiler options as such', () => {
    const { program, files } = checked;
    const diagnostics = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()];
    expect(diagnostics.map((d) => describeDiagnostic(d, files))).toEqual([]);
  });

  it.each(blocks.map((block) => [`${block.document}:${block.line}`, block] as const))('%s type-checks', (_where, block) => {
    const { program, files } = checked;
    const source = program.getSourceFile(virtualPath(block));
    expect(source).toBeDefined();
    const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
    expect(diagnostics.map((d) => describeDiagnostic(d, files))).toEqual([]);
  });
});

/**
 * Where each kind of code block of README.md and docs/ is checked. A block in another language (or
 * none) fails until a test covers it, or it is marked `text` (output, diagrams: not code).
 */
const BLOCK_CHECKS: Record<string, { documents: string[] | 'all'; checkedBy: string }> = {
  ts: { documents: CHECKED_DOCUMENTS, checkedBy: 'this file: type-checked' },
  sh: { documents: 'all', checkedBy: 'test/cli/docs.test.ts (workhorse command lines, files run), this file (npm scripts), test/package/install-lines.test.ts (install lines)' },
  sql: { documents: ['README.md', 'docs/security.md', 'docs/upgrading.md'], checkedBy: 'test/package/consumer-app.test.ts, test/reliability/security-setup.test.ts, test/core/schema-migrations.test.ts' },
  json: { documents: ['docs/cli.md'], checkedBy: 'test/cli/doc-examples.test.ts' },
  prisma: { documents: ['docs/integrations.md'], checkedBy: 'test/package/install-lines.test.ts' },
  text: { documents: 'all', checkedBy: 'not code (test/cli/doc-examples.test.ts compares the CLI transcripts of docs/cli.md)' },
};

it.each(LINKED_DOCUMENTS.filter((document) => !document.startsWith('sdk/')))(
  "%s has code blocks only in languages a test checks (or text)",
  (document) => {
    const unchecked = fencedBlocks(document)
      .filter((block) => {
        const check = BLOCK_CHECKS[block.language];
        return check === undefined || (check.documents !== 'all' && !check.documents.includes(document));
      })
      .map((block) => `${document}:${block.line} (${block.language || 'no language'})`);
    expect(unchecked).toEqual([]);
  },
);

describe('links and commands in the documents', () => {
  const scripts = Object.keys((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: object }).scripts);

  it.each(LINKED_DOCUMENTS)('%s names only npm scripts that exist', (document) => {
    const text = readFileSync(join(ROOT, document), 'utf8');
    const named = [...text.matchAll(/npm run ([\w:-]+)/g)].map((match) => match[1]);
    if (/\bnpm start\b/.test(text)) named.push('start');
    expect(named.filter((name) => !scripts.includes(name))).toEqual([]);
  });

  it.each(LINKED_DOCUMENTS)('%s links only to files that exist', (document) => {
    const text = readFileSync(join(ROOT, document), 'utf8').replace(/```[\s\S]*?```/g, '');
    const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)]
      .map((match) => match[1])
      .filter((target) => !/^[a-z]+:/.test(target) && !target.startsWith('#'))
      .map((target) => target.split('#')[0]);
    const missing = targets.filter((target) => !existsSync(resolve(ROOT, dirname(document), target)));
    expect(missing).toEqual([]);
  });

  it.each(LINKED_DOCUMENTS)("%s links only to headings that exist (its own, or another document's)", (document) => {
    const text = readFileSync(join(ROOT, document), 'utf8').replace(/```[\s\S]*?```/g, '');
    const links = [...text.matchAll(/\]\(([^)\s]*#[^)\s]+)\)/g)].map((match) => match[1]).filter((target) => !/^[a-z]+:/.test(target));
    const broken = links.filter((link) => {
      const [file, anchor] = link.split('#');
      const target = file === '' ? join(ROOT, document) : resolve(ROOT, dirname(document), file);
      if (!target.endsWith('.md') || !existsSync(target)) return false; // a missing file fails the test above
      return !headingAnchors(readFileSync(target, 'utf8')).has(anchor);
    });
    expect(broken).toEqual([]);
  });
});

/** The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const [, title] of markdown.replace(/```[\s\S]*?```/g, '').matchAll(/^#{1,6} (.*)$/gm)) {
    const base = title
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    let anchor = base;
    for (let n = 1; anchors.has(anchor); n += 1) anchor = `${base}-${n}`;
    anchors.add(anchor);
  }
  return anchors;
}

describe('docs/reliability.md', () => {
  it("lists exactly the failpoints of lib/core/failpoints.ts, in its order", () => {
    const source = readFileSync(join(ROOT, 'lib/core/failpoints.ts'), 'utf8');
    const union = /export type FailpointName =([^;]*);/.exec(source)?.[1] ?? '';
    const named = [...union.matchAll(/'([a-z-]+)'/g)].map((match) => match[1]);
    const doc = readFileSync(join(ROOT, 'docs/reliability.md'), 'utf8');
    const table = doc.slice(doc.indexOf('| point | where |'));
    const listed = [...table.slice(0, table.indexOf('\n\n')).matchAll(/^\| `([a-z-]+)` \|/gm)].map((match) => match[1]);
    expect(named.length).toBeGreaterThan(5);
    expect(listed).toEqual(named);
  });
});
