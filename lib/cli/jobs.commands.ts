/**
 * `workhorse jobs get|list|timeline`: the operator reads of `Admin`, from a shell (`cancel`,
 * `run-now`, `reschedule` and `delete` live in job-actions.commands.ts, `dead-letters` and
 * `redrive` in redrive.commands.ts). All checks of ids, names, limits and cursors are Admin's own, so the
 * CLI refuses exactly what the API refuses, with the same words.
 */
import { Admin } from '../core/admin';
import { JOB_STATES, type JobState, type ListJobsFilter } from '../core/types';
import { CliUsageError, EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandContext, CommandGroup } from './command';
import type { ParsedArguments } from './command-line';
import { CURSOR, explainingSchema, ID, LIMIT, limitOf, nextPageCommand, notFound } from './command-helpers';
import { formatJob, formatJobTable, formatTimeline } from './format';
import { deadLettersCommand, redriveCommand } from './redrive.commands';
import { cancelCommand, deleteCommand, rescheduleCommand, runNowCommand } from './job-actions.commands';

/** `--state` values, repeated and/or comma-separated, checked against the seven states. */
function statesOf(args: ParsedArguments): JobState[] | undefined {
  const given = args.list('state');
  if (given.length === 0) return undefined;
  const states = given.flatMap((value) => value.split(',')).map((value) => value.trim());
  for (const state of states) {
    if (!(JOB_STATES as readonly string[]).includes(state)) throw new CliUsageError(messages.badState(state, JOB_STATES));
  }
  return [...new Set(states as JobState[])];
}

async function get({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const id = args.positionals[0];
  const job = await explainingSchema(pool, () => new Admin(pool).getJob(id));
  if (job === null) throw notFound(id);
  if (output.json) output.document(job);
  else output.text(formatJob(job));
  return EXIT.ok;
}

async function list({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const cursor = args.string('cursor');
  const filter: ListJobsFilter = {
    queue: args.string('queue'),
    type: args.string('type'),
    states: statesOf(args),
    limit: limitOf(args),
    cursor,
  };
  const page = await explainingSchema(pool, () => new Admin(pool).listJobs(filter));
  if (output.json) {
    output.document(page);
    return EXIT.ok;
  }
  if (page.items.length === 0) {
    output.text(cursor === undefined ? messages.noJobs() : messages.noMoreJobs());
    return EXIT.ok;
  }
  output.text(formatJobTable(page.items));
  output.text('');
  output.text(
    page.nextCursor === null
      ? messages.jobCount(page.items.length)
      : messages.nextPage(
          page.items.length,
          'jobs',
          nextPageCommand(['workhorse', 'jobs', 'list'], args, ['queue', 'type', 'state', 'limit'], page.nextCursor),
        ),
  );
  return EXIT.ok;
}

async function timeline({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const id = args.positionals[0];
  const admin = new Admin(pool);
  const cursor = args.string('cursor');
  const page = await explainingSchema(pool, () => admin.getJobTimeline(id, { limit: limitOf(args), cursor }));
  // An unknown job and a job without history both have an empty timeline; only one exists.
  if (page.items.length === 0 && (await admin.getJob(id)) === null) throw notFound(id);
  if (output.json) {
    output.document(page);
    return EXIT.ok;
  }
  if (page.items.length === 0) {
    output.text(cursor === undefined ? messages.noHistory(id) : messages.noMoreEntries());
    return EXIT.ok;
  }
  output.text(formatTimeline(page.items));
  output.text('');
  output.text(
    page.nextCursor === null
      ? messages.entryCount(page.items.length)
      : messages.nextPage(
          page.items.length,
          'entries',
          nextPageCommand(['workhorse', 'jobs', 'timeline', id], args, ['limit'], page.nextCursor),
        ),
  );
  return EXIT.ok;
}

export const jobsCommands: CommandGroup = {
  name: 'jobs',
  summary: 'Look at jobs and their history; cancel, run now, reschedule or delete them; redrive dead letters.',
  subcommands: [
    {
      name: 'get',
      summary: 'Show one job: state, attempts, payload, and result or error.',
      description:
        'Shows one job, whichever state it is in: state, attempts, queue, type, payload, timing,\n' +
        'the owning worker while it runs, and its result or (last) error.',
      positionals: [ID],
      examples: ['workhorse jobs get 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10', 'workhorse jobs get 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10 --json | jq .state'],
      run: get,
    },
    {
      name: 'list',
      summary: 'List jobs, newest first, filtered by queue, type and state.',
      description:
        'Lists jobs newest first, a page at a time, optionally filtered by queue, type and current state.\n' +
        'Paging is stable: jobs enqueued meanwhile do not shift later pages.',
      options: [
        { name: 'queue', kind: 'string', valueName: 'Q', description: 'Only jobs of queue Q.' },
        { name: 'type', kind: 'string', valueName: 'T', description: 'Only jobs of type T.' },
        {
          name: 'state',
          kind: 'string',
          multiple: true,
          valueName: 'S',
          description: `Only jobs in state S: ${JOB_STATES.join(', ')}.\nRepeat the option or give a comma list: --state ready,active.`,
        },
        LIMIT('Jobs', 50),
        CURSOR,
      ],
      examples: [
        'workhorse jobs list --queue emails --state failed',
        'workhorse jobs list --state ready,active --limit 20',
        'workhorse jobs list --type report.build --json | jq -r ".items[].id"',
      ],
      run: list,
    },
    {
      name: 'timeline',
      summary: "Show a job's history: lifecycle events and closed attempts.",
      description:
        "Shows a job's history in the order it was written: lifecycle events (enqueued, claimed,\n" +
        'retry_scheduled, ...) and closed attempts (marked "attempt", with their error), a page at a time.',
      positionals: [ID],
      options: [LIMIT('Entries', 100), CURSOR],
      examples: ['workhorse jobs timeline 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10', 'workhorse jobs timeline 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10 --limit 20 --json'],
      run: timeline,
    },
    cancelCommand,
    runNowCommand,
    rescheduleCommand,
    deleteCommand,
    deadLettersCommand,
    redriveCommand,
  ],
};
