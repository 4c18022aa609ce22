/**
 * Every message `workhorse` shows a person, apart from the help texts (which sit next to the
 * commands they describe). Each error says what is wrong and what to do about it.
 */
import { BASELINE_SCHEMA_VERSION, type MigrationStepInfo } from '../core/migration-steps';
import type { CancelResult, JobState } from '../core/types';
import type { CompleteHumanWaitStatus } from '../core/waits';

const jobs = (count: number): string => (count === 1 ? '1 job' : `${count} jobs`);

export const messages = {
  // ---- the command line -------------------------------------------------------------------------
  usageHint: (command: string) => `Run \`${command} --help\` for usage.`,
  missingCommand: (command: string, choices: readonly string[]) =>
    `\`${command}\` needs a command: ${choices.join(', ')}.`,
  unknownCommand: (word: string, command: string, choices: readonly string[]) =>
    `unknown command "${word}" for \`${command}\` (commands: ${choices.join(', ')}).`,
  unknownOption: (option: string, command: string) => `unknown option ${option} for \`${command}\`.`,
  optionNeedsValue: (option: string, valueName: string) => `option ${option} needs a value: ${option} ${valueName}.`,
  optionTakesNoValue: (option: string) => `option ${option} takes no value.`,
  missingArgument: (name: string) => `missing argument ${name}.`,
  unexpectedArgument: (value: string) => `unexpected argument "${value}".`,
  badState: (value: string, states: readonly string[]) =>
    `--state: "${value}" is not a job state (${states.join(', ')}).`,
  noDatabase: () =>
    'no database given: set DATABASE_URL or pass --database-url postgres://user:password@host:5432/db.',

  badDatabaseUrl: (source: string) =>
    `${source} is not a PostgreSQL connection URL such as postgres://user:password@host:5432/db.`,

  // ---- the database -----------------------------------------------------------------------------
  connectionRefused: (target: string) =>
    `cannot connect to PostgreSQL at ${target}: connection refused. Is the server running, and is the database URL right?`,
  hostNotFound: (target: string) => `cannot connect to PostgreSQL at ${target}: the host name does not resolve.`,
  connectionTimeout: (target: string, seconds: number) =>
    `cannot connect to PostgreSQL at ${target}: no answer within ${seconds} s.`,
  connectionFailed: (target: string, reason: string) => `cannot connect to PostgreSQL at ${target}: ${reason}.`,
  databaseError: (target: string, reason: string) => `PostgreSQL at ${target} reported an error: ${reason}`,

  // ---- schema -----------------------------------------------------------------------------------
  schemaUpToDate: (version: number) => `Installed: version ${version}. This package: version ${version}. Up to date.`,
  schemaAbsent: () => 'No workhorse schema in this database. Run `workhorse schema migrate`.',
  schemaOlder: (installed: number, expected: number, minimum: number, pending: readonly MigrationStepInfo[]) =>
    pending.length === 0
      ? `Installed: version ${installed}. This package: version ${expected}. Out of date.\n` +
        `The database holds a workhorse schema older than version ${BASELINE_SCHEMA_VERSION}, the first one that can be migrated;\n` +
        'this package cannot upgrade it.'
      : `Installed: version ${installed}. This package: version ${expected}. Out of date.\n` +
    `The database holds an older workhorse schema: ${pending.length} migration step${pending.length === 1 ? '' : 's'} to apply.\n` +
    pending
      .map((step) => `  ${String(step.version).padStart(4, '0')} ${step.name} (${step.transactional ? 'one transaction' : 'no transaction, resumable'})\n`)
      .join('') +
    'Run `workhorse schema migrate` as the schema\'s owner; queued jobs, schedules and history are kept.\n' +
    (installed >= minimum
      ? `This package's workers and producers also work with version ${installed} meanwhile (they accept ${minimum} to ${expected}).`
      : `Until then this package's workers refuse to start (they accept versions ${minimum} to ${expected}).`),
  schemaNewer: (installed: number, expected: number, compatible: boolean) =>
    `Installed: version ${installed}. This package: version ${expected}. Out of date.\n` +
    'The database holds a newer workhorse schema than this package ships: a service there probably runs a newer\n' +
    (compatible
      ? `nestjs-workhorse. It still serves this release, whose workers and producers keep working with it; upgrade\n` +
        `this package to the release that ships schema version ${installed} when you can. A schema is never downgraded.`
      : 'nestjs-workhorse, and it no longer serves this release.\n' +
        `Upgrade this package to the release that ships schema version ${installed}; a schema is never downgraded.`),
  schemaWorkers: (workers: readonly { version: string; count: number }[] | null) =>
    workers === null
      ? 'Live workers: not visible to this role (listing them needs the operator capability).'
      : workers.length === 0
      ? 'Live workers: none.'
      : `Live workers: ${workers.map((w) => `${w.count} on ${w.version}`).join(', ')}.`,
  schemaInstalled: (version: number) => `Installed the workhorse schema, version ${version}.`,
  schemaMigrated: (from: number, to: number, applied: readonly number[]) =>
    `Migrated the workhorse schema from version ${from} to ${to} (applied step${applied.length === 1 ? '' : 's'} ${applied.join(', ')}). ` +
    'Queued jobs, schedules and history are kept.',
  schemaAlreadyInstalled: (version: number, expected: number) =>
    version === expected
      ? `The workhorse schema is already installed (version ${version}, the version this package ships). Nothing to do.`
      : `The workhorse schema is version ${version}, newer than this package's ${expected}, and still serves this release. ` +
        'Nothing to do: a schema is never downgraded.',
  schemaMissingForJobs: () => 'No workhorse schema in this database. Run `workhorse schema migrate` first.',
  schemaOtherVersionForJobs: (installed: number, expected: number) =>
    `the workhorse schema in this database is version ${installed}, but this package needs version ${expected}. ` +
    'Run `workhorse schema status` for what to do.',

  // ---- jobs -------------------------------------------------------------------------------------
  jobNotFound: (id: string) => `job ${id} not found`,
  noJobs: () => 'No jobs match.',
  noMoreJobs: () => 'No more jobs match.',
  jobCount: (count: number) => (count === 1 ? '1 job.' : `${count} jobs.`),
  noHistory: (id: string) =>
    `Job ${id} has no history entries (retention may have dropped them; \`workhorse jobs get ${id}\` shows its state).`,
  noMoreEntries: () => 'No more entries.',
  entryCount: (count: number) => (count === 1 ? '1 entry.' : `${count} entries.`),
  nextPage: (count: number, noun: string, command: string) =>
    `${count} ${noun} shown; more remain. Next page: ${command}`,
  cancelResult: (id: string, status: Exclude<CancelResult, 'not_found'>, state: JobState | null, workerId: string | null) => {
    switch (status) {
      case 'canceled':
        return `Canceled job ${id}.`;
      case 'cancel_requested':
        return (
          `Cancel requested for job ${id}: it is running${workerId ? ` on worker ${workerId}` : ''}. ` +
          'The worker stops the handler when it next renews its lease, and the job ends canceled.'
        );
      case 'already_terminal':
        return `Job ${id} already ended (${state ?? 'terminal'}); nothing to cancel.`;
    }
  },

  // ---- operator actions on jobs (job-actions.commands.ts) ---------------------------------------
  onlyWithId: (option: string) => `option ${option} only goes with a job ID.`,
  idRequired: () => 'give a job ID.',
  badPriority: (value: string) => `--priority: "${value}" is not a whole number from 0 to 100.`,
  runAtOrPriority: () => 'give --run-at ISO, --priority P or both.',
  ranNow: (id: string) => `Job ${id} is ready now.`,
  alreadyReady: (id: string) => `Job ${id} was ready already; nothing changed.`,
  rescheduled: (id: string, state: JobState | null, runAt: Date | null, priority: number | null) =>
    `Rescheduled job ${id}: ${state ?? 'gone'}, runs at ${runAt ? runAt.toISOString() : '-'}, priority ${priority ?? '-'}.`,
  deletedJob: (id: string) => `Deleted job ${id}.`,
  bulkWould: (action: string, count: number, capped: boolean) =>
    `Dry run: ${action} would change ${capped ? 'more than ' : ''}${jobs(count)}; nothing was written.`,
  bulkDone: (action: string, count: number, outcomes: Record<string, number>) => {
    const parts = Object.entries(outcomes).map(([outcome, n]) => `${n} ${outcome}`);
    return `${action}: changed ${jobs(count)}${parts.length > 0 ? ` (${parts.join(', ')})` : ''}.`;
  },
  bulkSkipped: (skipped: ReadonlyArray<[string, number | undefined]>, busy: number) => {
    const parts = skipped.map(([state, n]) => `${n ?? 0} ${state}`);
    if (busy > 0) parts.push(`${busy} busy (a worker was writing it, or it changed meanwhile)`);
    return `Left alone: ${parts.join(', ')}.`;
  },
  bulkPages: () => 'A run changes at most --limit jobs (1000 by default): run it again until nothing is left.',
  bulkMore: () => 'More jobs match: run the same command again for the next ones.',

  // ---- dead letters and redrive -----------------------------------------------------------------
  badTime: (option: string, value: string) =>
    `${option}: "${value}" is not an ISO 8601 time such as 2026-11-29T09:00:00Z or 2026-11-29 (a time needs Z or an offset).`,
  noDeadLetters: () => 'No dead letters match.',
  noMoreDeadLetters: () => 'No more dead letters match.',
  deadLetterCount: (count: number) => (count === 1 ? '1 dead letter.' : `${count} dead letters.`),
  requestIdRequired: () =>
    'option --request-id R is required: it makes the redrive safe to repeat (run it again with the same R after a failure).',
  idOrAll: () => 'give a job ID, or --all with optional filters.',
  idAndAll: () => 'give either a job ID or --all, not both.',
  onlyWithAll: (option: string) => `option ${option} only goes with --all.`,
  notDeadLetter: (id: string, state: JobState) => `job ${id} is ${state}, not a dead letter: only failed jobs can be redriven.`,
  redriven: (source: string, created: string) => `Redrove job ${source}: new job ${created}.`,
  alreadyRedriven: (source: string, created: string) =>
    `Job ${source} was already redriven as job ${created}; nothing new was created (--again makes another copy).`,
  againWithId: () => 'option --again goes with one job ID, not with --all.',
  noneToRedrive: (dryRun: boolean) =>
    dryRun ? 'No dead letters match. Dry run: nothing was written.' : 'No dead letters match; nothing redriven.',
  redrivenMany: (count: number) => (count === 1 ? 'Redrove 1 dead letter.' : `Redrove ${count} dead letters.`),
  wouldRedrive: (count: number) =>
    `Dry run: would redrive ${count === 1 ? '1 dead letter' : `${count} dead letters`}; nothing was written.`,

  // ---- queues -----------------------------------------------------------------------------------
  noQueues: () => 'No queues: no live jobs, no pause records and no limits.',
  queueCount: (count: number) => (count === 1 ? '1 queue.' : `${count} queues.`),
  queuePaused: (queue: string) =>
    `Paused queue ${queue}: workers stop claiming its jobs; running jobs finish and enqueue goes on.`,
  queueAlreadyPaused: (queue: string, since: string, by: string | null) =>
    `Queue ${queue} is already paused (since ${since}${by ? ` by ${by}` : ''}); nothing changed.`,
  queueResumed: (queue: string) => `Resumed queue ${queue}: workers claim its jobs again.`,
  queueNotPaused: (queue: string) => `Queue ${queue} was not paused; workers claim its jobs as before.`,
  queueLimited: (queue: string, limits: string) => `Limited queue ${queue}: ${limits}, across all workers.`,
  queueUnlimited: (queue: string) => `Queue ${queue} has no limits: workers claim its jobs as fast as they have free slots.`,
  limitNeedsALimit: () => 'give --concurrency N, --rate N --per D, --per-key N, or several (`workhorse queues unlimit Q` removes the limits).',
  rateNeedsPer: () => '--rate N and --per D go together.',

  // ---- health and retention --------------------------------------------------------------------
  badThreshold: (value: string) =>
    `--threshold: "${value}" is not NAME.LEVEL=N, such as oldestReadyMs.warn=5000 or readyWithoutWorkers.warn=null.`,

  // ---- workers ----------------------------------------------------------------------------------
  noWorkers: () => 'No workers registered: none runs, or none reported since it started.',
  workerCount: (count: number) => (count === 1 ? '1 worker.' : `${count} workers.`),
  workerNotFound: (workerId: string) =>
    `no worker ${workerId} in the registry (it stopped, or was gone for over a day). Run \`workhorse workers list\` for the ids.`,
  drainRequested: (workerId: string) =>
    `Asked worker ${workerId} to drain: within its heartbeat interval it stops claiming and finishes its jobs. Stop its process once \`workhorse workers list\` shows it drained.`,
  drainAlreadyRequested: (workerId: string) => `Worker ${workerId} was already asked to drain; nothing changed.`,

  // ---- schedules --------------------------------------------------------------------------------
  noSchedules: (namespace: string | undefined) =>
    namespace === undefined ? 'No schedules.' : `No schedules in namespace ${namespace}.`,
  scheduleCount: (count: number) => (count === 1 ? '1 schedule.' : `${count} schedules.`),
  schedulePaused: (key: string) => `Paused schedule ${key}: its occurrences are skipped until it is resumed.`,
  scheduleAlreadyPaused: (key: string) => `Schedule ${key} is already paused; nothing changed.`,
  scheduleResumed: (key: string) => `Resumed schedule ${key}: it fires again from its next occurrence.`,
  scheduleNotPaused: (key: string) => `Schedule ${key} was not paused; nothing changed.`,
  scheduleTriggered: (key: string, jobId: string) => `Triggered schedule ${key}: enqueued job ${jobId}.`,

  // ---- human waits ------------------------------------------------------------------------------
  noWaits: () => 'No open human waits match.',
  noMoreWaits: () => 'No more open human waits match.',
  waitCount: (count: number) => (count === 1 ? '1 open wait.' : `${count} open waits.`),
  badJsonDecision: (text: string) => `DECISION ${JSON.stringify(text)} is not JSON (leave out --json-decision to send it as a string).`,
  actorRequired: () => 'option --actor A is required here: the system cannot say who is logged in.',
  waitCompleted: (id: string, name: string, status: 'completed' | 'duplicate') =>
    status === 'completed'
      ? `Recorded the decision for wait ${JSON.stringify(name)} of job ${id}; the job resumes.`
      : `The decision for wait ${JSON.stringify(name)} of job ${id} was recorded before with this idempotency key; nothing changed.`,
  waitNotCompleted: (id: string, name: string, status: CompleteHumanWaitStatus) => {
    const wait = `wait ${JSON.stringify(name)} of job ${id}`;
    switch (status) {
      case 'already_decided':
        return `${wait} was already decided; nothing recorded.`;
      case 'timed_out':
        return `${wait} timed out before this decision; nothing recorded.`;
      case 'not_waiting':
        return `job ${id} has not reached a wait ${JSON.stringify(name)}; nothing recorded.`;
      case 'finished':
        return `job ${id} already ended; nothing recorded.`;
      default:
        return `job ${id} not found`;
    }
  },

  // ---- anything else ----------------------------------------------------------------------------
  unexpected: (reason: string) => `unexpected error: ${reason}`,
};
