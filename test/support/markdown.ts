/**
 * The fenced code blocks of a Markdown document, for tests that check the documents against the
 * code: type-check their examples (test/readme.test.ts) or build an application from them
 * (test/package/consumer-app.test.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Block {
  /** The document, relative to the repository. */
  document: string;
  /** The `## ` heading the block stands under ('' before the first one). */
  section: string;
  /** 1-based line of the block's first code line in the document. */
  line: number;
  /** The fence's info string: `ts`, `sh`, `sql`, ... */
  language: string;
  code: string;
}

export function fencedBlocks(root: string, document: string): Block[] {
  const lines = readFileSync(join(root, document), 'utf8').split('\n');
  const blocks: Block[] = [];
  let section = '';
  let open: { language: string; line: number; code: string[] } | null = null;
  lines.forEach((text, index) => {
    const fence = /^```(\S*)\s*$/.exec(text);
    if (open === null) {
      if (fence) open = { language: fence[1], line: index + 2, code: [] };
      else if (text.startsWith('## ')) section = text.slice(3).trim();
    } else if (text === '```') {
      blocks.push({ document, section, line: open.line, language: open.language, code: open.code.join('\n') });
      open = null;
    } else {
      open.code.push(text);
    }
  });
  if (open !== null) throw new Error(`${document}: a code block is never closed`);
  return blocks;
}

/** The file a block stands for when its first line is a comment naming it (`// src/app.module.ts`). */
export function namedFile(block: Block): string | null {
  return /^\/\/ (\S+\.ts)$/.exec(block.code.split('\n')[0])?.[1] ?? null;
}
