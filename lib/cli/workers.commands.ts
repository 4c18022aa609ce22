/**
 * `workhorse workers list|drain`: the registry of live workers, and asking one to drain before
 * its process is stopped, through `Admin.listWorkers` and `drainWorker`.
 */
import { Admin } from '../core/admin';
import { CliError, EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandContext, CommandGroup } from './command';
import { ACTOR, actorOptions, explainingSchema, REASON } from './command-helpers';
import { formatWorkerTable } from './format';

async function list({ pool, output }: CommandContext): Promise<ExitCode> {
  const workers = await explainingSchema(pool, () => new Admin(pool).listWorkers());
  if (output.json) {
    output.document(workers);
    return EXIT.ok;
  }
  if (workers.length === 0) {
    output.text(messages.noWorkers());
    return EXIT.ok;
  }
  output.text(formatWorkerTable(workers));
  output.text('');
  output.text(messages.workerCount(workers.length));
  return EXIT.ok;
}

async function drain({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const workerId = args.positionals[0];
  const result = await explainingSchema(pool, () => new Admin(pool).drainWorker(workerId, actorOptions(args)));
  if (result === 'not_found') throw new CliError(messages.workerNotFound(workerId), EXIT.failure);
  if (output.json) output.document({ workerId, result });
  else output.text(result === 'requested' ? messages.drainRequested(workerId) : messages.drainAlreadyRequested(workerId));
  return EXIT.ok;
}

export const workersCommands: CommandGroup = {
  name: 'workers',
  summary: 'List the live workers, and ask one to drain before its process is stopped.',
  subcommands: [
    {
      name: 'list',
      summary: 'List registered workers: host, pid, queues, jobs held, status.',
      description:
        'Lists the workers in the registry, newest first: where each runs, the queues it claims from, its\n' +
        'concurrency, the jobs it held at its last report, its version, and its status: running,\n' +
        'draining, drained (safe to stop) or gone (three reports missed).',
      examples: ['workhorse workers list', 'workhorse workers list --json | jq -r ".[] | select(.status == \\"gone\\") | .workerId"'],
      run: list,
    },
    {
      name: 'drain',
      summary: 'Ask a worker to drain: it stops claiming and finishes the jobs it holds.',
      description:
        'Asks a worker to drain: within its heartbeat interval it stops claiming and finishes the jobs it\n' +
        'holds; `workhorse workers list` then shows it drained, and its process can be stopped without\n' +
        'abandoning work. Asking again changes nothing (the first request keeps its time, actor and reason).',
      positionals: [{ name: 'ID', description: 'The worker id, as `workhorse workers list` shows it.' }],
      options: [ACTOR, REASON],
      examples: ['workhorse workers drain web-1:4242:9f3a0c1e --reason "host maintenance"'],
      run: drain,
    },
  ],
};
