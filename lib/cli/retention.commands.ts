/**
 * `workhorse retention status|run`: the retention policy and how far it got, and one pass now,
 * through `Admin.retentionStatus` and `runRetention`.
 */
import { Admin } from '../core/admin';
import { EXIT, type ExitCode } from './cli.errors';
import type { CommandContext, CommandGroup } from './command';
import { explainingSchema } from './command-helpers';
import { formatDate, formatFields } from './format';
import { printable } from './output';

async function status({ pool, output }: CommandContext): Promise<ExitCode> {
  const s = await explainingSchema(pool, () => new Admin(pool).retentionStatus());
  if (output.json) {
    output.document(s);
    return EXIT.ok;
  }
  const days = (n: number) => (n === 1 ? '1 day' : `${n} days`);
  output.text(
    formatFields([
      ['enabled', s.policy.enabled ? 'yes' : 'no'],
      ['job events', `${days(s.policy.jobEventDays)} (oldest kept: ${s.oldestJobEventDay ?? '-'})`],
      ['attempt history', `${days(s.policy.attemptHistoryDays)} (oldest kept: ${s.oldestAttemptHistoryDay ?? '-'})`],
      ['finished jobs', `${s.policy.finishedJobMs} ms`],
      ['changed', s.policy.changedAt === null ? '-'
        : `${formatDate(s.policy.changedAt)} by ${printable(s.policy.changedBy ?? '-')} (login role ${printable(s.policy.loginRole ?? '-')})`],
      ['last run', formatDate(s.lastRunAt)],
      ['covered until', formatDate(s.coveredUntil)],
      ['lag', s.lagMs === null ? '-' : `${s.lagMs} ms`],
      ['deferred jobs', String(s.deferredJobs)],
      ['expired partitions', String(s.expiredPartitions)],
      ['jobs purged', String(s.jobsPurged)],
      ['partitions dropped', String(s.partitionsDropped)],
      ['lock timeouts', String(s.lockTimeouts)],
    ]),
  );
  return EXIT.ok;
}

async function run({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const value = args.string('budget');
  const budget = value === undefined ? undefined : /^\d+$/.test(value) ? Number(value) : Number.NaN;
  const result = await explainingSchema(pool, () => new Admin(pool).runRetention({ budget }));
  if (output.json) output.document(result);
  else if (result.disabled) output.text('Retention is disabled; nothing was removed.');
  else if (result.skipped) output.text('Another retention pass is running; nothing was done.');
  else {
    output.text(
      `Removed ${result.jobsPurged} finished job(s) of ${result.jobsExamined} looked at, dropped ${result.partitionsDropped} partition(s)` +
        `${result.lockTimeouts ? ` (${result.lockTimeouts} drop(s) gave up waiting for their lock)` : ''}` +
        `${result.more ? '; more is left: run it again' : ''}.`,
    );
  }
  return EXIT.ok;
}

export const retentionCommands: CommandGroup = {
  name: 'retention',
  summary: 'Show the retention policy and how far it got, or run one retention pass now.',
  subcommands: [
    {
      name: 'status',
      summary: 'Show the retention policy, its last run, its lag and what it removed so far.',
      examples: ['workhorse retention status', 'workhorse retention status --json | jq .lagMs'],
      run: status,
    },
    {
      name: 'run',
      summary: 'Run one retention pass now (the maintenance tick runs them anyway).',
      description:
        'Drops the history partitions past their window and removes up to --budget finished jobs past\n' +
        'theirs (never a live job, nor one a live job still references). Safe to run while workers run.',
      options: [{ name: 'budget', kind: 'string', valueName: 'N', description: 'Jobs to look at, 1 to 1000000 (default 10000).' }],
      examples: ['workhorse retention run --budget 100000'],
      run,
    },
  ],
};
