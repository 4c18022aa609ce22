/**
 * `workhorse waits list|complete`: the human decisions jobs wait for (`ctx.waitForHuman`), and
 * recording one, through `Admin.listHumanWaits` and `Queue.completeHumanWait`. All checks of
 * ids, names, limits and cursors are the API's own, so the CLI refuses exactly what it refuses.
 */
import { Admin } from '../core/admin';
import { Queue } from '../core/queue';
import type { JsonValue } from '../core/types';
import type { ListHumanWaitsFilter } from '../core/waits';
import { CliError, CliUsageError, EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandContext, CommandGroup } from './command';
import { actorOf, CURSOR, explainingSchema, ID, LIMIT, limitOf, nextPageCommand, REASON } from './command-helpers';
import { formatHumanWaitTable } from './format';

async function list({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const cursor = args.string('cursor');
  const filter: ListHumanWaitsFilter = {
    queue: args.string('queue'),
    type: args.string('type'),
    name: args.string('name'),
    jobId: args.string('job'),
    limit: limitOf(args),
    cursor,
  };
  const page = await explainingSchema(pool, () => new Admin(pool).listHumanWaits(filter));
  if (output.json) {
    output.document(page);
    return EXIT.ok;
  }
  if (page.items.length === 0) {
    output.text(cursor === undefined ? messages.noWaits() : messages.noMoreWaits());
    return EXIT.ok;
  }
  output.text(formatHumanWaitTable(page.items));
  output.text('');
  output.text(
    page.nextCursor === null
      ? messages.waitCount(page.items.length)
      : messages.nextPage(
          page.items.length,
          'waits',
          nextPageCommand(['workhorse', 'waits', 'list'], args, ['queue', 'type', 'name', 'job', 'limit'], page.nextCursor),
        ),
  );
  return EXIT.ok;
}

/** DECISION as given, or parsed as JSON with `--json-decision`. */
function decisionOf(text: string, asJson: boolean): JsonValue {
  if (!asJson) return text;
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    throw new CliUsageError(messages.badJsonDecision(text));
  }
}

async function complete({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const [id, name, text] = args.positionals;
  const decision = decisionOf(text, args.flag('json-decision'));
  const actor = actorOf(args);
  if (actor === undefined) throw new CliUsageError(messages.actorRequired());
  const reason = args.string('reason');
  const key = args.string('idempotency-key');
  const status = await explainingSchema(pool, () =>
    new Queue(pool).completeHumanWait(id, name, decision, {
      actor,
      ...(reason !== undefined && { reason }),
      ...(key !== undefined && { idempotencyKey: key }),
    }),
  );
  const done = status === 'completed' || status === 'duplicate';
  if (output.json) {
    output.document({ jobId: id, name, status });
    return done ? EXIT.ok : EXIT.failure;
  }
  if (!done) throw new CliError(messages.waitNotCompleted(id, name, status), EXIT.failure);
  output.text(messages.waitCompleted(id, name, status));
  return EXIT.ok;
}

export const waitsCommands: CommandGroup = {
  name: 'waits',
  summary: 'List the human decisions jobs wait for, and record one.',
  subcommands: [
    {
      name: 'list',
      summary: 'List open human waits, oldest first, with their context and choices.',
      description:
        'Lists the human decisions jobs wait for (ctx.waitForHuman), oldest first, a page at a time:\n' +
        'the job, its queue and type, the wait name, since when, its timeout, its choices and its context.',
      options: [
        { name: 'queue', kind: 'string', valueName: 'Q', description: 'Only waits of jobs of queue Q.' },
        { name: 'type', kind: 'string', valueName: 'T', description: 'Only waits of jobs of type T.' },
        { name: 'name', kind: 'string', valueName: 'N', description: 'Only waits named N.' },
        { name: 'job', kind: 'string', valueName: 'ID', description: 'Only the waits of job ID.' },
        LIMIT('Waits', 50),
        CURSOR,
      ],
      examples: ['workhorse waits list --queue refunds', 'workhorse waits list --name approve-refund --json | jq -r ".items[].jobId"'],
      run: list,
    },
    {
      name: 'complete',
      summary: "Record a decision for a job's open human wait and resume the job.",
      description:
        "Records DECISION for the open human wait NAME of job ID, with who decided and why, and wakes\n" +
        'the job. DECISION is taken as a string (one of the wait\'s choices, when it has some), or as\n' +
        'JSON with --json-decision. Exits 1 when the wait was already decided otherwise, timed out,\n' +
        'is not reached yet, or the job is unknown or finished.',
      positionals: [ID, { name: 'NAME', description: 'The wait name.' }, { name: 'DECISION', description: 'The decision.' }],
      options: [
        { name: 'actor', kind: 'string', valueName: 'A', description: 'Who decided, recorded with the decision (default: your OS user name).' },
        REASON,
        { name: 'idempotency-key', kind: 'string', valueName: 'K', description: 'Makes a repeat with the same K answer "duplicate".' },
        { name: 'json-decision', kind: 'flag', description: 'Read DECISION as JSON (e.g. \'{"approved": true}\').' },
      ],
      examples: [
        'workhorse waits complete 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10 approve-refund approve --reason "loyal customer"',
        "workhorse waits complete 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10 review '{\"score\": 4}' --json-decision",
      ],
      run: complete,
    },
  ],
};
