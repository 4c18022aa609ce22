/**
 * `workhorse jobs cancel|run-now|reschedule|delete`: the operator actions on jobs of `Admin`, on
 * one job by ID or, with `--all`, on the jobs that match filters (`cancelMatching`,
 * `runNowMatching`, `deleteMatching`; `--dry-run` counts first). The states each action applies
 * to, the filter's rules and the bounds are the SQL functions'; the CLI only reads the command
 * line and prints the answer.
 */
import { Admin } from '../core/admin';
import type { BulkActionResult, JobActionFilter } from '../core/job-actions';
import { JOB_STATES, type JobState } from '../core/types';
import { CliUsageError, EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandContext, OptionSpec, RunnableCommand } from './command';
import type { ParsedArguments } from './command-line';
import { ACTOR, actorOptions, explainingSchema, ID, limitOf, notFound, REASON, timeOf } from './command-helpers';
import { formatTable } from './format';

type Bulk = 'cancel' | 'run-now' | 'delete';

const LIVE_FILTERS: readonly OptionSpec[] = [
  { name: 'queue', kind: 'string', valueName: 'Q', description: 'With --all: only jobs of queue Q.' },
  { name: 'type', kind: 'string', valueName: 'T', description: 'With --all: only jobs of type T.' },
  {
    name: 'state',
    kind: 'string',
    multiple: true,
    valueName: 'S',
    description: `With --all: only jobs in state S (${JOB_STATES.join(', ')});\nrepeat it or give a comma list.`,
  },
  { name: 'tag', kind: 'string', valueName: 'TAG', description: 'With --all: only jobs tagged TAG.' },
  { name: 'created-after', kind: 'string', valueName: 'ISO', description: 'With --all: only jobs created at or after this time.' },
  { name: 'created-before', kind: 'string', valueName: 'ISO', description: 'With --all: only jobs created before this time.' },
];

const FINISHED_FILTERS: readonly OptionSpec[] = [
  { name: 'finished-after', kind: 'string', valueName: 'ISO', description: 'With --all: only jobs that finished at or after this time.' },
  { name: 'finished-before', kind: 'string', valueName: 'ISO', description: 'With --all: only jobs that finished before this time.' },
];

const BULK_OPTIONS: readonly OptionSpec[] = [
  { name: 'all', kind: 'flag', description: 'Act on every job that matches the filters instead of one ID.' },
  { name: 'limit', kind: 'string', valueName: 'N', description: 'With --all: at most N jobs this run, oldest first, 1 to 1000 (default 1000).' },
  { name: 'dry-run', kind: 'flag', description: 'With --all: count the jobs it would change, show the first ones, write nothing.' },
];

function filterNames(action: Bulk): string[] {
  return [...LIVE_FILTERS, ...(action === 'delete' ? FINISHED_FILTERS : [])].map((option) => option.name);
}

function statesOf(args: ParsedArguments): JobState[] | undefined {
  const given = args.list('state').flatMap((value) => value.split(',')).map((value) => value.trim());
  if (given.length === 0) return undefined;
  for (const state of given) {
    if (!(JOB_STATES as readonly string[]).includes(state)) throw new CliUsageError(messages.badState(state, JOB_STATES));
  }
  return [...new Set(given as JobState[])];
}

function filterOf(args: ParsedArguments): JobActionFilter {
  const filter: JobActionFilter = {
    queue: args.string('queue'),
    type: args.string('type'),
    states: statesOf(args),
    tag: args.string('tag'),
    createdAfter: timeOf(args, 'created-after'),
    createdBefore: timeOf(args, 'created-before'),
    finishedAfter: timeOf(args, 'finished-after'),
    finishedBefore: timeOf(args, 'finished-before'),
  };
  return Object.fromEntries(Object.entries(filter).filter(([, value]) => value !== undefined)) as JobActionFilter;
}

/** The job ID, or `--all`: one of them (usage errors otherwise). */
function target(args: ParsedArguments, action: Bulk, oneOnly: readonly string[] = []): string | null {
  const id = args.positionals[0];
  const all = args.flag('all');
  if (all && id !== undefined) throw new CliUsageError(messages.idAndAll());
  if (all) {
    for (const name of oneOnly) if (args.flag(name)) throw new CliUsageError(messages.onlyWithId(`--${name}`));
    return null;
  }
  if (id === undefined) throw new CliUsageError(messages.idOrAll());
  for (const name of [...filterNames(action), 'limit', 'dry-run']) {
    if (args.flag(name)) throw new CliUsageError(messages.onlyWithAll(`--${name}`));
  }
  return id;
}

async function bulk({ args, pool, output }: CommandContext, action: Bulk): Promise<ExitCode> {
  const admin = new Admin(pool);
  const dryRun = args.flag('dry-run');
  const limit = limitOf(args);
  const options = { dryRun, ...(limit !== undefined && { limit }), ...actorOptions(args) };
  const filter = filterOf(args);
  const result = await explainingSchema(pool, () =>
    action === 'cancel'
      ? admin.cancelMatching(filter, options)
      : action === 'run-now'
        ? admin.runNowMatching(filter, options)
        : admin.deleteMatching(filter, options),
  );
  if (output.json) {
    output.document(result);
    return EXIT.ok;
  }
  output.text(describeBulk(action, result));
  return EXIT.ok;
}

function describeBulk(action: Bulk, result: BulkActionResult): string {
  const lines: string[] = [];
  if (result.dryRun && result.sample.length > 0) {
    lines.push(formatTable(['ID', 'TYPE', 'QUEUE', 'STATE', 'CREATED'], result.sample.map((s) => [s.id, s.type, s.queue, s.state, s.createdAt.toISOString()])), '');
  }
  lines.push(result.dryRun ? messages.bulkWould(action, result.matched, result.capped) : messages.bulkDone(action, result.changed, result.outcomes));
  const skipped = Object.entries(result.skipped);
  if (skipped.length > 0 || result.busy > 0) lines.push(messages.bulkSkipped(skipped, result.busy));
  if (result.more) lines.push(result.dryRun ? messages.bulkPages() : messages.bulkMore());
  return lines.join('\n');
}

async function cancel(context: CommandContext): Promise<ExitCode> {
  const { args, pool, output } = context;
  const id = target(args, 'cancel');
  if (id === null) return bulk(context, 'cancel');
  const admin = new Admin(pool);
  const status = await explainingSchema(pool, () => admin.cancel(id, actorOptions(args)));
  if (status === 'not_found') throw notFound(id);
  // Read back what the cancel did: the final state, or the worker that was told to stop.
  const job = await admin.getJob(id);
  if (output.json) output.document({ id, status, state: job?.state ?? null });
  else output.text(messages.cancelResult(id, status, job?.state ?? null, job?.workerId ?? null));
  return EXIT.ok;
}

async function runNow(context: CommandContext): Promise<ExitCode> {
  const { args, pool, output } = context;
  const id = target(args, 'run-now');
  if (id === null) return bulk(context, 'run-now');
  const status = await explainingSchema(pool, () => new Admin(pool).runNow(id, actorOptions(args)));
  if (status === 'not_found') throw notFound(id);
  if (output.json) output.document({ id, status });
  else output.text(status === 'ready' ? messages.ranNow(id) : messages.alreadyReady(id));
  return EXIT.ok;
}

async function reschedule({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const id = args.positionals[0];
  if (id === undefined) throw new CliUsageError(messages.idRequired());
  const runAt = timeOf(args, 'run-at');
  const given = args.string('priority');
  const priority = given === undefined ? undefined : Number(given);
  if (priority !== undefined && !/^\d+$/.test(given ?? '')) throw new CliUsageError(messages.badPriority(given ?? ''));
  if (runAt === undefined && priority === undefined) throw new CliUsageError(messages.runAtOrPriority());
  const admin = new Admin(pool);
  const status = await explainingSchema(pool, () =>
    admin.reschedule(id, { ...(runAt !== undefined && { runAt }), ...(priority !== undefined && { priority }), ...actorOptions(args) }),
  );
  if (status === 'not_found') throw notFound(id);
  const job = await admin.getJob(id);
  if (output.json) output.document({ id, status, state: job?.state ?? null, runAt: job?.runAt ?? null, priority: job?.priority ?? null });
  else output.text(messages.rescheduled(id, job?.state ?? null, job?.runAt ?? null, job?.priority ?? null));
  return EXIT.ok;
}

async function deleteJob(context: CommandContext): Promise<ExitCode> {
  const { args, pool, output } = context;
  const id = target(args, 'delete');
  if (id === null) return bulk(context, 'delete');
  const status = await explainingSchema(pool, () => new Admin(pool).deleteJob(id, actorOptions(args)));
  if (status === 'not_found') throw notFound(id);
  if (output.json) output.document({ id, status });
  else output.text(messages.deletedJob(id));
  return EXIT.ok;
}

const ONE_OR_ALL = { ...ID, description: 'The job; leave out with --all.', optional: true };

export const cancelCommand: RunnableCommand = {
  name: 'cancel',
  summary: 'Cancel a job, or all that match with --all: at once if not running, otherwise ask its worker to stop.',
  description:
    'Cancels a job. A job that is not running ends canceled at once. For a running job the request is\n' +
    "recorded; its worker aborts the handler's signal when it next renews the lease, and the job ends\n" +
    'canceled. A job that already ended is left as it is (exit 0; the output says so). With --all,\n' +
    'cancels the live jobs that match the filters, at most 1000 a run (--dry-run counts them first).',
  positionals: [ONE_OR_ALL],
  options: [...BULK_OPTIONS, ...LIVE_FILTERS, ACTOR, { ...REASON, description: 'Why, stored with the job (at most 1000 characters).' }],
  examples: [
    'workhorse jobs cancel 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10 --reason "customer withdrew the order"',
    'workhorse jobs cancel --all --queue emails --type newsletter.send --dry-run',
    'workhorse jobs cancel --all --queue emails --type newsletter.send --reason "wrong template"',
  ],
  run: cancel,
};

export const runNowCommand: RunnableCommand = {
  name: 'run-now',
  summary: 'Make a scheduled, retrying or sleeping job ready now, or all that match with --all.',
  description:
    'Makes a job that waits for its run time (scheduled, a retry, a durable sleep) ready at once. A\n' +
    'running, blocked, waiting or finished job is refused (exit 1, naming its state). With --all,\n' +
    'runs the matching jobs now, at most 1000 a run; the others (e.g. running ones) are counted.',
  positionals: [ONE_OR_ALL],
  options: [...BULK_OPTIONS, ...LIVE_FILTERS, ACTOR, REASON],
  examples: [
    'workhorse jobs run-now 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10 --reason "customer waiting"',
    'workhorse jobs run-now --all --queue billing --state scheduled --dry-run',
  ],
  run: runNow,
};

export const rescheduleCommand: RunnableCommand = {
  name: 'reschedule',
  summary: 'Give a job that has not started a new run time and/or priority.',
  description:
    'Gives a scheduled, ready or retrying job a new run time (--run-at; now or past makes it ready)\n' +
    'and/or priority (--priority, 0 to 100). A job that started or finished is refused (exit 1).',
  positionals: [{ ...ID, description: 'The job.' }],
  options: [
    { name: 'run-at', kind: 'string', valueName: 'ISO', description: 'The new run time, e.g. 2026-12-01T06:00:00Z.' },
    { name: 'priority', kind: 'string', valueName: 'P', description: 'The new priority, 0 to 100 (higher runs first).' },
    ACTOR,
    REASON,
  ],
  examples: ['workhorse jobs reschedule 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10 --run-at 2026-12-01T06:00:00Z --priority 90'],
  run: reschedule,
};

export const deleteCommand: RunnableCommand = {
  name: 'delete',
  summary: 'Delete a finished job and what references it, or all that match with --all.',
  description:
    'Deletes a finished job (succeeded, failed or canceled) with its outcome, checkpoints, waits and\n' +
    'links, as retention would. A live job, or a finished one a live job still references, is refused\n' +
    '(exit 1). With --all, deletes the matching finished jobs, at most 1000 a run; live and\n' +
    'referenced ones are counted.',
  positionals: [ONE_OR_ALL],
  options: [...BULK_OPTIONS, ...LIVE_FILTERS, ...FINISHED_FILTERS, ACTOR, REASON],
  examples: [
    'workhorse jobs delete 0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10 --reason "test data"',
    'workhorse jobs delete --all --queue imports --state failed --finished-before 2026-11-01 --dry-run',
  ],
  run: deleteJob,
};
