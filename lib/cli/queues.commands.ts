/**
 * `workhorse queues list|pause|resume|limit|unlimit`: which queues exist, whether workers claim
 * from them, and switching that, through `Admin.listQueues`, `pauseQueue` and `resumeQueue`; the
 * limits are in queue-limits.commands.ts.
 */
import { Admin } from '../core/admin';
import type { QueueInfo } from '../core/types';
import { EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandContext, CommandGroup } from './command';
import { ACTOR, actorOptions, explainingSchema, REASON } from './command-helpers';
import { formatDate, formatQueueTable } from './format';
import { limitCommand, unlimitCommand } from './queue-limits.commands';

const QUEUE = { name: 'Q', description: 'The queue name.' };

async function list({ pool, output }: CommandContext): Promise<ExitCode> {
  const queues = await explainingSchema(pool, () => new Admin(pool).listQueues());
  if (output.json) {
    output.document(queues);
    return EXIT.ok;
  }
  if (queues.length === 0) {
    output.text(messages.noQueues());
    return EXIT.ok;
  }
  output.text(formatQueueTable(queues));
  output.text('');
  output.text(messages.queueCount(queues.length));
  return EXIT.ok;
}

/** The queue's pause state before a change, to tell a change from a repeat. */
async function pausedBefore(admin: Admin, queue: string): Promise<QueueInfo | undefined> {
  return (await admin.listQueues()).find((info) => info.queue === queue);
}

async function pause({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const queue = args.positionals[0];
  const admin = new Admin(pool);
  const options = actorOptions(args);
  const before = await explainingSchema(pool, () => pausedBefore(admin, queue));
  const info = await admin.pauseQueue(queue, options);
  const changed = before?.paused !== true;
  if (output.json) output.document({ ...info, changed });
  else output.text(changed ? messages.queuePaused(queue) : messages.queueAlreadyPaused(queue, formatDate(info.changedAt), info.changedBy));
  return EXIT.ok;
}

async function resume({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const queue = args.positionals[0];
  const admin = new Admin(pool);
  const options = actorOptions(args);
  const before = await explainingSchema(pool, () => pausedBefore(admin, queue));
  const info = await admin.resumeQueue(queue, options);
  const changed = before?.paused === true;
  if (output.json) output.document({ ...info, changed });
  else output.text(changed ? messages.queueResumed(queue) : messages.queueNotPaused(queue));
  return EXIT.ok;
}

export const queuesCommands: CommandGroup = {
  name: 'queues',
  summary: 'List queues with their live jobs, pause or resume claiming from them, and limit them.',
  subcommands: [
    {
      name: 'list',
      summary: 'List queues: paused or not, by whom and why, their live job counts and limits.',
      description:
        'Lists every queue that has live jobs, a limit, or was ever paused or resumed: whether it is paused,\n' +
        'when, by whom and why that last changed, how many of its jobs are ready, scheduled, active and\n' +
        'blocked, and its concurrency and rate limits.',
      examples: ['workhorse queues list', 'workhorse queues list --json | jq -r ".[] | select(.paused) | .queue"'],
      run: list,
    },
    {
      name: 'pause',
      summary: 'Pause a queue: workers stop claiming its jobs.',
      description:
        'Pauses a queue: workers stop claiming its jobs. Jobs already running finish, and enqueueing goes on,\n' +
        'so jobs wait until the queue is resumed. Pausing a paused queue changes nothing (the first pause\n' +
        'keeps its time, actor and reason).',
      positionals: [QUEUE],
      options: [ACTOR, REASON],
      examples: ['workhorse queues pause billing --reason "payment provider outage"'],
      run: pause,
    },
    {
      name: 'resume',
      summary: 'Resume a paused queue: workers claim its jobs again.',
      description: 'Resumes a paused queue and wakes its workers, which claim its jobs again.',
      positionals: [QUEUE],
      options: [ACTOR, REASON],
      examples: ['workhorse queues resume billing --reason "provider recovered"'],
      run: resume,
    },
    limitCommand,
    unlimitCommand,
  ],
};
