/**
 * `workhorse schedules list|pause|resume|trigger`: the schedules of `Admin` from a shell. The
 * checks of keys, namespaces, actors and reasons are Admin's own; an unknown schedule exits 1,
 * as an unknown job does.
 */
import { Admin } from '../core/admin';
import { ScheduleNotFoundError } from '../core/errors';
import type { ScheduleInfo } from '../core/schedules/types';
import { CliError, EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandContext, CommandGroup, OptionSpec } from './command';
import type { ParsedArguments } from './command-line';
import { ACTOR, actorOptions, explainingSchema, REASON } from './command-helpers';
import { formatDate, formatTable } from './format';
import { oneLine } from './output';

const KEY = { name: 'KEY', description: 'The schedule key.' };

const NAMESPACE: OptionSpec = {
  name: 'namespace',
  kind: 'string',
  valueName: 'N',
  description: 'The namespace of the schedule (default: default).',
};

const LIST_NAMESPACE: OptionSpec = {
  name: 'namespace',
  kind: 'string',
  valueName: 'N',
  description: 'Only the schedules of this namespace (default: every namespace).',
};

function formatScheduleTable(schedules: readonly ScheduleInfo[]): string {
  return formatTable(
    ['NAMESPACE', 'KEY', 'STATE', 'TYPE', 'CRON', 'TIME ZONE', 'NEXT RUN', 'LAST RUN', 'LAST JOB', 'LAST ERROR'],
    schedules.map((s) => [
      s.namespace,
      s.key,
      s.state,
      s.type,
      s.cron,
      s.timezone,
      formatDate(s.nextRunAt),
      formatDate(s.lastRunAt),
      s.lastJobId === null ? '-' : `${s.lastJobId} (${s.lastJobState ?? 'gone'})`,
      s.lastError === null ? '-' : oneLine(s.lastError),
    ]),
  );
}

/** Runs an action on one schedule, turning "no such schedule" into exit 1. */
async function onSchedule<T>(pool: CommandContext['pool'], work: () => Promise<T>): Promise<T> {
  try {
    return await explainingSchema(pool, work);
  } catch (error) {
    if (error instanceof ScheduleNotFoundError) throw new CliError(error.message.replace(/^key: /, ''), EXIT.failure);
    throw error;
  }
}

function target(args: ParsedArguments): { key: string; namespace: string | undefined } {
  return { key: args.positionals[0], namespace: args.string('namespace') };
}

async function list({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const namespace = args.string('namespace');
  const schedules = await explainingSchema(pool, () => new Admin(pool).listSchedules({ namespace }));
  if (output.json) {
    output.document(schedules);
    return EXIT.ok;
  }
  if (schedules.length === 0) {
    output.text(messages.noSchedules(namespace));
    return EXIT.ok;
  }
  output.text(formatScheduleTable(schedules));
  output.text('');
  output.text(messages.scheduleCount(schedules.length));
  return EXIT.ok;
}

/** `pause` or `resume`: says whether the schedule changed. */
function setPaused(pause: boolean) {
  return async ({ args, pool, output }: CommandContext): Promise<ExitCode> => {
    const { key, namespace } = target(args);
    const admin = new Admin(pool);
    const options = { namespace, ...actorOptions(args) };
    const changed = await onSchedule(pool, () => (pause ? admin.pauseSchedule(key, options) : admin.resumeSchedule(key, options)));
    if (output.json) output.document({ key, namespace: namespace ?? 'default', changed });
    else if (pause) output.text(changed ? messages.schedulePaused(key) : messages.scheduleAlreadyPaused(key));
    else output.text(changed ? messages.scheduleResumed(key) : messages.scheduleNotPaused(key));
    return EXIT.ok;
  };
}

async function trigger({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const { key, namespace } = target(args);
  const jobId = await onSchedule(pool, () => new Admin(pool).triggerSchedule(key, { namespace, ...actorOptions(args) }));
  if (output.json) output.document({ key, namespace: namespace ?? 'default', jobId });
  else output.text(messages.scheduleTriggered(key, jobId));
  return EXIT.ok;
}

export const schedulesCommands: CommandGroup = {
  name: 'schedules',
  summary: 'List cron schedules with their next and last runs; pause, resume or trigger one.',
  subcommands: [
    {
      name: 'list',
      summary: 'List schedules: state, cron expression and zone, next and last run, last job.',
      description:
        'Lists the schedules of every namespace (or of --namespace): active, paused or disabled (no longer\n' +
        'declared by its application), the cron expression and its time zone, the next planned run, the\n' +
        'last run with its job and that job\'s state, and the last error enqueueing one.',
      options: [LIST_NAMESPACE],
      examples: ['workhorse schedules list', 'workhorse schedules list --namespace billing --json'],
      run: list,
    },
    {
      name: 'pause',
      summary: 'Pause a schedule: its occurrences are skipped until it is resumed.',
      description:
        'Pauses a schedule: its occurrences are skipped (and recorded as skipped) until it is resumed; jobs it\n' +
        'enqueued before go on. Pausing a paused schedule changes nothing.',
      positionals: [KEY],
      options: [NAMESPACE, ACTOR, REASON],
      examples: ['workhorse schedules pause reports.nightly --reason "month-end freeze"'],
      run: setPaused(true),
    },
    {
      name: 'resume',
      summary: 'Resume a paused schedule from its next occurrence.',
      description: 'Resumes a paused schedule from its next occurrence; what came due while it was paused is not caught up.',
      positionals: [KEY],
      options: [NAMESPACE, ACTOR, REASON],
      examples: ['workhorse schedules resume reports.nightly'],
      run: setPaused(false),
    },
    {
      name: 'trigger',
      summary: 'Enqueue a schedule\'s job now, besides its occurrences.',
      description:
        'Enqueues the schedule\'s job now, with its payload and options, whatever its overlap rule and also\n' +
        'while it is paused (not when disabled), and prints the job id. Recorded in the schedule\'s history.',
      positionals: [KEY],
      options: [NAMESPACE, ACTOR, REASON],
      examples: ['workhorse schedules trigger reports.nightly --reason "rerun after the fix"'],
      run: trigger,
    },
  ],
};
