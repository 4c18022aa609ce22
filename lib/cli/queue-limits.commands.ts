/**
 * `workhorse queues limit|unlimit`: a queue's flow control (at most N active jobs, at most N
 * claims per interval, across all workers), through `Admin.setQueuePolicy`.
 */
import { Admin } from '../core/admin';
import type { QueueInfo, QueuePolicy } from '../core/types';
import { CliUsageError, EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandContext, RunnableCommand } from './command';
import type { ParsedArguments } from './command-line';
import { ACTOR, actorOptions, explainingSchema, REASON } from './command-helpers';
import { formatLimits } from './format';

const QUEUE = { name: 'Q', description: 'The queue name.' };
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * `--per`: milliseconds, or a whole number with a unit (`500ms`, `1s`, `2m`, `1h`). Anything
 * else is NaN, which Admin refuses naming `rateLimit.intervalMs`.
 */
export function durationMs(text: string): number {
  const match = /^(\d+)(ms|s|m|h)?$/.exec(text.trim());
  return match ? Number(match[1]) * UNITS[match[2] ?? 'ms'] : Number.NaN;
}

/** A whole number as a number; anything else NaN, for Admin to refuse with the field's name. */
function integerOf(text: string): number {
  return /^-?\d+$/.test(text) ? Number(text) : Number.NaN;
}

function policyOf(args: ParsedArguments): QueuePolicy {
  const concurrency = args.string('concurrency');
  const rate = args.string('rate');
  const per = args.string('per');
  const perKey = args.string('per-key');
  if (concurrency === undefined && rate === undefined && perKey === undefined) throw new CliUsageError(messages.limitNeedsALimit());
  if ((rate === undefined) !== (per === undefined)) throw new CliUsageError(messages.rateNeedsPer());
  return {
    ...(concurrency !== undefined && { concurrency: integerOf(concurrency) }),
    ...(rate !== undefined && per !== undefined && { rateLimit: { limit: integerOf(rate), intervalMs: durationMs(per) } }),
    ...(perKey !== undefined && { perKey: { concurrency: integerOf(perKey) } }),
  };
}

async function setPolicy({ args, pool, output }: CommandContext, policy: QueuePolicy | null): Promise<ExitCode> {
  const queue = args.positionals[0];
  const info: QueueInfo = await explainingSchema(pool, () => new Admin(pool).setQueuePolicy(queue, policy, actorOptions(args)));
  if (output.json) output.document(info);
  else output.text(policy === null ? messages.queueUnlimited(queue) : messages.queueLimited(queue, formatLimits(info)));
  return EXIT.ok;
}

export const limitCommand: RunnableCommand = {
  name: 'limit',
  summary: 'Limit a queue: at most N active jobs, at most N claims per interval, across all workers.',
  description:
    'Sets the flow control of a queue, replacing its limits: --concurrency N lets at most N of its jobs be\n' +
    'active at once, --rate N --per D lets workers claim at most N of its jobs in any window of D. Both hold\n' +
    'across all workers, applied by the claim itself; --per-key N lets at most N jobs of one concurrency key\n' +
    '(the enqueue option concurrencyKey) be active at once. A limit not given is removed; `queues unlimit` removes all.',
  positionals: [QUEUE],
  options: [
    { name: 'concurrency', kind: 'string', valueName: 'N', description: 'At most N of the queue\'s jobs active at once (1 to 100000).' },
    { name: 'rate', kind: 'string', valueName: 'N', description: 'At most N claims per --per window (1 to 100000).' },
    { name: 'per', kind: 'string', valueName: 'D', description: 'The rate window: milliseconds, or 500ms, 1s, 2m, 1h (at most a day).' },
    { name: 'per-key', kind: 'string', valueName: 'N', description: 'At most N active jobs per concurrency key (1 to 100000).' },
    ACTOR,
    REASON,
  ],
  examples: ['workhorse queues limit billing --concurrency 5', 'workhorse queues limit emails --rate 50 --per 1s', 'workhorse queues limit imports --per-key 1'],
  run: (context) => setPolicy(context, policyOf(context.args)),
};

export const unlimitCommand: RunnableCommand = {
  name: 'unlimit',
  summary: 'Remove the concurrency, rate and per-key limits of a queue.',
  description: 'Removes the flow control of a queue: workers claim its jobs as fast as they have free slots.',
  positionals: [QUEUE],
  options: [ACTOR, REASON],
  examples: ['workhorse queues unlimit billing'],
  run: (context) => setPolicy(context, null),
};
