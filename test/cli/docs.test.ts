/**
 * docs/cli.md stays true to the command table: its list of commands is exactly the commands
 * `workhorse` runs, each has a section of its own, and every option a command accepts is
 * documented. A command added to the table (one entry) fails here until it is documented.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isGroup, type CommandSpec, type RunnableCommand } from '../../lib/cli/command';
import { COMMON_OPTIONS, rootCommand } from '../../lib/cli/commands';

const DOC = readFileSync(join(resolve(__dirname, '..', '..'), 'docs', 'cli.md'), 'utf8');

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
