import { Cron } from 'croner';
import { InvalidCronError, UnknownTimeZoneError } from '../errors';

/**
 * Cron evaluation, in one place: every schedule expression goes through croner (see
 * docs/decisions.md for why croner) with the same options, whether it is checked at a sync or
 * planned by a worker, so the two can never read an expression differently.
 *
 * - 5 fields (seconds are 0) or 6 (seconds first); 7 (years) is refused. Macros: `@yearly`,
 *   `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly`.
 * - Day of month and day of week, both restricted, match when either matches (as Vixie cron).
 * - Daylight saving, in the schedule's zone (croner's rules): a fixed time (one value each in
 *   seconds, minutes and hours, such as `30 2 * * *`) that falls in a spring-forward gap runs at
 *   the end of the gap, and one that occurs twice at fall-back runs once (at the first); other
 *   expressions (every 15 minutes, `0 * * * *`) skip the times a gap removes and run at both
 *   occurrences of a repeated time.
 */
export function compileCron(key: string, expression: string, timezone: string): Cron {
  if (!isKnownTimeZone(timezone)) throw new UnknownTimeZoneError(key, timezone);
  let cron: Cron;
  try {
    cron = new Cron(expression, { timezone, mode: '5-or-6-parts' });
  } catch (error) {
    throw new InvalidCronError(key, expression, describe(error));
  }
  if (cron.nextRun(new Date(0)) === null) throw new InvalidCronError(key, expression, 'it never occurs');
  return cron;
}

/** True for a time zone name the runtime's time zone database (ICU) knows. */
export function isKnownTimeZone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}

// croner's messages start with the class that raised them ("CronPattern: Invalid value ...").
function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/^Cron\w*:\s*/, '');
}
