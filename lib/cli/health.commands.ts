/**
 * `workhorse health`: `Admin.health()` for people and monitoring scripts; the exit code says the
 * level (0 ok, 4 warn, 5 critical), so a cron job or a probe can act on it without parsing.
 */
import { Admin } from '../core/admin';
import type { HealthReport, HealthThresholds, ThresholdPair } from '../core/operator/health';
import { CliUsageError, EXIT, type ExitCode } from './cli.errors';
import { messages } from './cli.messages';
import type { CommandContext, RunnableCommand } from './command';
import { explainingSchema } from './command-helpers';
import { formatHealth } from './format';

const LEVEL_EXIT = { ok: EXIT.ok, warn: EXIT.healthWarn, critical: EXIT.healthCritical } as const;

/** `--threshold oldestReadyMs.warn=5000` (or `=null`) into thresholds; Admin checks the names and values. */
function thresholdsOf(values: readonly string[]): HealthThresholds {
  const thresholds: Record<string, ThresholdPair> = {};
  for (const value of values) {
    const match = /^([A-Za-z]+)\.([A-Za-z]+)=(null|\d+(?:\.\d+)?)$/.exec(value);
    if (!match) throw new CliUsageError(messages.badThreshold(value));
    const [, key, level, amount] = match;
    thresholds[key] = { ...thresholds[key], [level]: amount === 'null' ? null : Number(amount) };
  }
  return thresholds as HealthThresholds;
}

async function health({ args, pool, output }: CommandContext): Promise<ExitCode> {
  const thresholds = thresholdsOf(args.list('threshold'));
  const report: HealthReport = await explainingSchema(pool, () => new Admin(pool).health(thresholds));
  if (output.json) output.document(report);
  else output.text(formatHealth(report));
  return LEVEL_EXIT[report.status];
}

export const healthCommand: RunnableCommand = {
  name: 'health',
  summary: 'Check the queue: live jobs, waits, expired leases, dead letters, workers, retention; exit code by level.',
  description:
    'Reads one consistent snapshot (Admin.health): per queue the live jobs by state, the oldest ready\n' +
    "job's wait, expired leases not yet recovered and dead letters of the last hour; live workers;\n" +
    'retention lag; missing history partitions. Prints the status with its reasons and exits 0 (ok),\n' +
    '4 (warn) or 5 (critical).',
  options: [
    {
      name: 'threshold',
      kind: 'string',
      multiple: true,
      valueName: 'NAME.LEVEL=N',
      description: 'Override one threshold, e.g. oldestReadyMs.warn=5000 (null: never); repeatable.',
    },
  ],
  examples: ['workhorse health', 'workhorse health --threshold oldestReadyMs.critical=120000 --json'],
  run: health,
};
