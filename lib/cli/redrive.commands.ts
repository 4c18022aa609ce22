/**
 * `workhorse jobs dead-letters` and `workhorse jobs redrive`: find failed jobs and run them
 * again as new jobs, through `Admin.listDeadLetters`, `redrive` and `redriveMany`. As with the
 * other `jobs` commands, Admin checks names, limits, cursors, request ids, actors and reasons.
 */
import { Admin } from '../core/admin';
import type { DeadLetterFilter } from '../core/types';
import { CliError, CliUsageError, EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandContext, OptionSpec, RunnableCommand } from './command';
import type { ParsedArguments } from './command-line';
import {
  ACTOR,
  actorOptions,
  CURSOR,
  explainingSchema,
  ID,
  LIMIT,
  limitOf,
  nextPageCommand,
  notFound,
  REASON,
  timeOf,
} from './command-helpers';
import { formatDeadLetterTable, formatRedriveTable } from './format';

const FILTER_OPTIONS: readonly OptionSpec[] = [
  { name: 'queue', kind: 'string', valueName: 'Q', description: 'Only dead letters of queue Q.' },
  { name: 'type', kind: 'string', valueName: 'T', description: 'Only dead letters of type T.' },
  { name: 'error-name', kind: 'string', valueName: 'N', description: 'Only those whose final error is named N (e.g. PaymentDeclined).' },
  {
    name: 'finished-after',
    kind: 'string',
    valueName: 'ISO',
    description: 'Only those that failed at or after this time, e.g. 2026-11-29T09:00:00Z\n(a date alone means UTC midnight).',
  },
  { name: 'finished-before', kind: 'string', valueName: 'ISO', description: 'Only those that failed before this time.' },
];

const FILTER_NAMES = FILTER_OPTIONS.map((option) => option.name);

function filterOf(args: ParsedArguments): DeadLetterFilter {
  const filter: DeadLetterFilter = {
    queue: args.string('queue'),
    type: args.string('type'),
    errorName: args.string('error-name'),
    finishedAfter: timeOf(args, 'finished-after'),
    finishedBefore: timeOf(args, 'finished-before'),
  };
  // Admin refuses unknown keys, and absent ones are simply not there.
  return Object.fromEntries(Object.entries(filter).filter(([, value]) => value !== undefined)) as DeadLetterFilter;
}

async function deadLetters({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const cursor = args.string('cursor');
  const filter = filterOf(args);
  const limit = limitOf(args);
  const page = await explainingSchema(pool, () =>
    new Admin(pool).listDeadLetters({ ...filter, ...(limit !== undefined && { limit }), ...(cursor !== undefined && { cursor }) }),
  );
  if (output.json) {
    output.document(page);
    return EXIT.ok;
  }
  if (page.items.length === 0) {
    output.text(cursor === undefined ? messages.noDeadLetters() : messages.noMoreDeadLetters());
    return EXIT.ok;
  }
  output.text(formatDeadLetterTable(page.items));
  output.text('');
  output.text(
    page.nextCursor === null
      ? messages.deadLetterCount(page.items.length)
      : messages.nextPage(
          page.items.length,
          'dead letters',
          nextPageCommand(['workhorse', 'jobs', 'dead-letters'], args, [...FILTER_NAMES, 'limit'], page.nextCursor),
        ),
  );
  return EXIT.ok;
}

async function redrive(context: CommandContext): Promise<ExitCode> {
  const { args } = context;
  const id = args.positionals[0];
  const all = args.flag('all');
  if (all && id !== undefined) throw new CliUsageError(messages.idAndAll());
  if (all && args.flag('again')) throw new CliUsageError(messages.againWithId());
  if (!all) {
    if (id === undefined) throw new CliUsageError(messages.idOrAll());
    for (const name of [...FILTER_NAMES, 'limit', 'dry-run']) {
      if (args.flag(name)) throw new CliUsageError(messages.onlyWithAll(`--${name}`));
    }
  }
  const requestId = args.string('request-id');
  if (requestId === undefined) throw new CliUsageError(messages.requestIdRequired());
  return all ? redriveAll(context, requestId) : redriveOne(context, id, requestId);
}

async function redriveOne({ args, pool, output }: CommandContext, id: string, requestId: string): Promise<ExitCode> {
  const admin = new Admin(pool);
  // Read first, so that an unknown or unfinished job gets its own message (and exit 1).
  const job = await explainingSchema(pool, () => admin.getJob(id));
  if (job === null) throw notFound(id);
  if (job.state !== 'failed') throw new CliError(messages.notDeadLetter(id, job.state), EXIT.failure);
  const again = args.flag('again');
  const newJobId = await admin.redrive(id, { requestId, ...actorOptions(args), ...(again && { again }) });
  if (output.json) output.document({ sourceJobId: id, newJobId });
  else if (!job.redrivenTo.includes(newJobId)) output.text(messages.redriven(id, newJobId));
  else output.text(messages.alreadyRedriven(id, newJobId));
  return EXIT.ok;
}

async function redriveAll({ args, pool, output }: CommandContext, requestId: string): Promise<ExitCode> {
  const dryRun = args.flag('dry-run');
  const limit = limitOf(args);
  const results = await explainingSchema(pool, () =>
    new Admin(pool).redriveMany(filterOf(args), { requestId, dryRun, ...(limit !== undefined && { limit }), ...actorOptions(args) }),
  );
  if (output.json) {
    output.document({ dryRun, items: results });
    return EXIT.ok;
  }
  if (results.length === 0) {
    output.text(messages.noneToRedrive(dryRun));
    return EXIT.ok;
  }
  output.text(formatRedriveTable(results));
  output.text('');
  output.text(dryRun ? messages.wouldRedrive(results.length) : messages.redrivenMany(results.length));
  return EXIT.ok;
}

export const deadLettersCommand: RunnableCommand = {
  name: 'dead-letters',
  summary: 'List dead letters (failed jobs), newest first, filtered by queue, type, error and time.',
  description:
    'Lists dead letters, the jobs that failed for good, newest first, a page at a time: optionally only\n' +
    'those of a queue or type, with a given final error name, or that failed within a time window.',
  options: [...FILTER_OPTIONS, LIMIT('Dead letters', 50), CURSOR],
  examples: [
    'workhorse jobs dead-letters --queue billing --error-name PaymentDeclined',
    'workhorse jobs dead-letters --finished-after 2026-11-29T09:00:00Z --finished-before 2026-11-29T10:00:00Z',
    'workhorse jobs dead-letters --type invoice.send --json | jq -r ".items[].id"',
  ],
  run: deadLetters,
};

export const redriveCommand: RunnableCommand = {
  name: 'redrive',
  summary: 'Run dead letters again as new jobs: one by ID, or all that match with --all.',
  description:
    'Redrives dead letters: each becomes a new job with the same type, queue, payload and settings,\n' +
    'starting at attempt 1; the failed job stays as it is, and both record the link. Give one job ID,\n' +
    'or --all with filters (at most 1000 at a time; --dry-run lists them and writes nothing).\n' +
    'Repeating a command with the same --request-id creates no further jobs, so a failed run can be\n' +
    'retried safely. A dead letter is redriven once: redriving it again, with any request id, gives\n' +
    'the job its first redrive created (--again makes another copy); with --all, dead letters that\n' +
    'another request already redrove are skipped.',
  positionals: [{ ...ID, description: 'The dead letter to redrive (a failed job); leave out with --all.', optional: true }],
  options: [
    {
      name: 'request-id',
      kind: 'string',
      valueName: 'R',
      description: 'Required. Makes the redrive idempotent: reuse R to repeat it safely (1 to 200\ncharacters; with --all at most 160).',
    },
    { name: 'all', kind: 'flag', description: 'Redrive every dead letter that matches the filters below.' },
    ...FILTER_OPTIONS.map((option) => ({ ...option, description: `With --all: ${option.description[0].toLowerCase()}${option.description.slice(1)}` })),
    { name: 'limit', kind: 'string', valueName: 'N', description: 'With --all: at most N dead letters, newest first, 1 to 1000 (default 1000).' },
    { name: 'dry-run', kind: 'flag', description: 'With --all: list what would be redriven, and write nothing.' },
    { name: 'again', kind: 'flag', description: 'With an ID: make another copy of a dead letter that was redriven before.' },
    ACTOR,
    REASON,
  ],
  examples: [
    'workhorse jobs redrive 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10 --request-id fix-4711 --reason "card processor back"',
    'workhorse jobs redrive --all --queue billing --error-name Timeout --request-id incident-82 --dry-run',
    'workhorse jobs redrive --all --queue billing --error-name Timeout --request-id incident-82',
  ],
  run: redrive,
};
