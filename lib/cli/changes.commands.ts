/**
 * `workhorse changes`: the operator changes of settings kept in place (queue pause and resume,
 * queue limits, drain requests, the retention policy), newest first, through
 * `Admin.listOperatorChanges`: who (the actor and the login role) did what, when and why.
 */
import { Admin } from '../core/admin';
import type { OperatorChangeKind } from '../core/operator/operator-changes';
import { EXIT, type ExitCode } from './cli.errors';
import type { CommandContext, RunnableCommand } from './command';
import { explainingSchema } from './command-helpers';
import { formatOperatorChanges } from './format';

async function changes({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const limit = args.string('limit');
  const filter = {
    ...(args.string('kind') !== undefined && { kind: args.string('kind') as OperatorChangeKind }),
    ...(args.string('subject') !== undefined && { subject: args.string('subject') }),
    // Admin (SQL) checks the kind and the range; a limit that is not a number is refused as one.
    ...(limit !== undefined && { limit: /^\d+$/.test(limit) ? Number(limit) : Number.NaN }),
  };
  const rows = await explainingSchema(pool, () => new Admin(pool).listOperatorChanges(filter));
  if (output.json) output.document(rows);
  else output.text(rows.length === 0 ? 'No operator change is recorded.' : formatOperatorChanges(rows));
  return EXIT.ok;
}

export const changesCommand: RunnableCommand = {
  name: 'changes',
  summary: 'List operator changes (queue pause/resume and limits, drains, retention): who, when, why.',
  description:
    'Lists the changes of settings that are kept in place, newest first: queue pauses and resumes, queue\n' +
    'limits, drain requests and retention policy changes, each with the actor the caller named, the\n' +
    'database login role of the session that made it (which the caller cannot choose) and the reason.',
  options: [
    { name: 'kind', kind: 'string', valueName: 'K', description: 'Only this kind: queue_paused, queue_resumed, queue_policy_set, worker_drain_requested, retention_set.' },
    { name: 'subject', kind: 'string', valueName: 'NAME', description: 'Only changes of this queue or worker id.' },
    { name: 'limit', kind: 'string', valueName: 'N', description: 'At most N changes, 1 to 1000 (default 100).' },
  ],
  examples: ['workhorse changes --subject billing --kind queue_paused --limit 1', 'workhorse changes --json'],
  run: changes,
};
