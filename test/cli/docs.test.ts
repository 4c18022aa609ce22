/**
 * docs/cli.md stays true to the command table: its list of commands is exactly the commands
 * `workhorse` runs, each has a section of its own, and every option a command accepts is
 * documented. A command added to the table (one entry) fails here until it is documented.
 * And the shell examples of every document name only what exists: each `workhorse` command line
 * is one the CLI accepts as written (command, options, arguments), and each file a `node` or
 * `psql -f` line runs is in the repository.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isGroup, type CommandSpec, type RunnableCommand } from '../../lib/cli/command';
import { checkPositionals, parseArguments, resolveCommand } from '../../lib/cli/command-line';
import { COMMON_OPTIONS, rootCommand } from '../../lib/cli/commands';
import { fencedBlocks } from '../support/markdown';

const ROOT = resolve(__dirname, '..', '..');
const DOC = readFileSync(join(ROOT, 'docs', 'cli.md'), 'utf8');

/** Every runnable command with the words that name it: `workhorse jobs get`. */
function runnable(command: CommandSpec, words: string[] = []): [string, RunnableCommand][] {
  const named = [...words, command.name];
  return isGroup(command) ? command.subcommands.flatMap((sub) => runnable(sub, named)) : [[named.join(' '), command]];
}

const COMMANDS = runnable(rootCommand);

/** The text of the section whose heading is `## <title>`, up to the next `## `. */
function section(title: string): string {
  const start = DOC.indexOf(`\n## ${title}\n`);
  if (start === -1) throw new Error(`docs/cli.md has no section "## ${title}"`);
  const end = DOC.indexOf('\n## ', start + 1);
  return DOC.slice(start, end === -1 ? undefined : end);
}

it('the Commands table lists exactly the commands of the table', () => {
  const rows = [...section('Commands').matchAll(/^\| `(workhorse[^`]*)` \|/gm)].map((m) => m[1]);
  // A row names the command, then its arguments (`ID`, `Q`) or a distinguishing option (`--all`).
  const documented = new Set(rows.map((row) => row.split(' ').filter((word) => /^[a-z][a-z-]*$/.test(word) || word === 'workhorse').join(' ')));
  expect([...documented].sort()).toEqual(COMMANDS.map(([name]) => name).sort());
});

it.each(COMMANDS)('`%s` has a section of its own, which names each of its options', (name, command) => {
  const heading = [...DOC.matchAll(/^## (.*)$/gm)].map((m) => m[1]).find((title) => title.includes(`\`${name}`));
  expect(heading).toBeDefined();
  const text = section(heading as string);
  for (const option of command.options ?? []) expect(text).toContain(`\`--${option.name}`);
});

it('the options of every command are documented with them', () => {
  const text = section('Commands');
  for (const option of COMMON_OPTIONS) expect(text).toContain(`\`--${option.name}`);
});

/** Every document with shell examples: README.md and docs/ (benchmarks included). */
const DOCUMENTS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`),
  ...readdirSync(join(ROOT, 'docs', 'benchmarks')).filter((name) => name.endsWith('.md')).map((name) => `docs/benchmarks/${name}`),
];

/** The shell lines of a document's ```sh blocks, comments removed, with where they stand. */
const SHELL_LINES = DOCUMENTS.flatMap((document) =>
  fencedBlocks(ROOT, document)
    .filter((block) => block.language === 'sh')
    .flatMap((block) => block.code.split('\n').map((text, i) => [`${document}:${block.line + i}`, text.replace(/(^|\s)#.*$/, '').trim()] as const)),
).filter(([, text]) => text !== '');

/** The words of a shell command, double and single quotes grouping, `${...}` expansions dropped. */
function words(command: string): string[] {
  return [...command.replace(/\$\{[^}]*\}/g, '').matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]);
}

/** The `workhorse` command lines a shell line runs (directly, through npx, or in `$(...)`). */
function workhorseCommands(text: string): string[][] {
  // A command starts a line, follows `$(`, `&&`, `;` or `|`, after any NAME=value assignments.
  return [...text.matchAll(/(?:^|\$\(|&&|;|\|)\s*(?:[A-Z_]+=\S+\s+)*(?:npx\s+workhorse|node\s+bin\/workhorse\.js|workhorse)(?=\s|$)([^)|&;]*)/g)].map(
    (match) => words(match[1]),
  );
}

const WORKHORSE_LINES = SHELL_LINES.flatMap(([where, text]) => workhorseCommands(text).map((argv) => [where, argv] as const));

it('the documents run the CLI in their shell examples', () => {
  expect(WORKHORSE_LINES.length).toBeGreaterThanOrEqual(10);
});

it.each(WORKHORSE_LINES)('%s: `workhorse %j` is a command line the CLI accepts', (_where, argv) => {
  // As runCli reads it: the command, then its options and arguments (--help needs no database).
  const path: CommandSpec[] = [rootCommand];
  const rest = resolveCommand(argv, path, COMMON_OPTIONS);
  const command = path[path.length - 1];
  if (isGroup(command)) {
    expect(rest.some((word) => word === '--help' || word === '--version')).toBe(true);
    return;
  }
  const args = parseArguments(rest, [...(command.options ?? []), ...COMMON_OPTIONS], path.map((c) => c.name).join(' '));
  checkPositionals(args, command.positionals ?? []);
});

it.each(SHELL_LINES.filter(([, text]) => /(^|\s)(node|psql)\s/.test(text)))('%s: the files `%s` runs exist', (_where, text) => {
  const files = words(text).filter((word, i, all) => /\.(js|ts|sql|py)$/.test(word) && word.includes('/') && (all[i - 1] === 'node' || all[i - 1] === '-f'));
  for (const file of files) expect(existsSync(join(ROOT, file)) ? file : `${file} (missing)`).toBe(file);
});
