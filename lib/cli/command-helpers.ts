/**
 * What the `jobs` and `queues` commands share: option specs, the schema-aware error wrapper,
 * parsing of `--limit`, and the next-page command line.
 */
import { userInfo } from 'node:os';
import type { Pool } from 'pg';
import { SchemaNotInstalledError } from '../core/errors';
import { getSchemaStatus } from '../core/schema';
import type { OptionSpec } from './command';
import type { ParsedArguments } from './command-line';
import { CliError, CliUsageError, EXIT } from './cli.errors';
import { messages } from './cli.messages';
import { sqlState } from './database-connection';

export const ID = { name: 'ID', description: 'The job id (a UUID, as enqueue returned it).' };

export const LIMIT = (what: string, fallback: number): OptionSpec => ({
  name: 'limit',
  kind: 'string',
  valueName: 'N',
  description: `${what} per page, 1 to 1000 (default ${fallback}).`,
});

export const CURSOR: OptionSpec = {
  name: 'cursor',
  kind: 'string',
  valueName: 'C',
  description: 'Read the page after the one that printed this cursor.',
};

// SQLSTATEs of a missing schema, table or function: the database lacks what this package calls.
const MISSING_OBJECT = new Set(['3F000', '42P01', '42883']);

/**
 * Runs `work`; if the database lacks the workhorse objects it calls, the error says whether the
 * schema is absent or another version, instead of quoting PostgreSQL's "function does not exist".
 */
export async function explainingSchema<T>(pool: Pool, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const state = sqlState(error);
    const missing = error instanceof SchemaNotInstalledError || (state !== undefined && MISSING_OBJECT.has(state));
    if (!missing) throw error;
    const status = await getSchemaStatus(pool).catch(() => null);
    if (status?.installed === null) throw new CliError(messages.schemaMissingForJobs(), EXIT.failure);
    if (status && !status.upToDate && status.installed !== null) {
      throw new CliError(messages.schemaOtherVersionForJobs(status.installed, status.expected), EXIT.failure);
    }
    throw error;
  }
}

/**
 * `--limit` as a number for Admin to check. Anything but an integer becomes NaN, so that Admin
 * refuses it with its usual "limit: must be an integer from 1 to 1000".
 */
export function limitOf(args: ParsedArguments): number | undefined {
  const value = args.string('limit');
  if (value === undefined) return undefined;
  return /^-?\d+$/.test(value) ? Number(value) : Number.NaN;
}

export function notFound(id: string): CliError {
  return new CliError(messages.jobNotFound(id), EXIT.failure);
}

// Names, states, numbers and cursors are shell-safe as they are; anything else is quoted.
export function shellWord(value: string): string {
  return /^[A-Za-z0-9._:/,=@%+-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

/** The command line that reads the next page: the same filters, and the new cursor. */
export function nextPageCommand(base: string[], args: ParsedArguments, names: readonly string[], cursor: string): string {
  const words = [...base];
  for (const name of names) {
    const value = name === 'state' ? args.list(name).join(',') : args.string(name);
    if (value) words.push(`--${name}`, value);
  }
  words.push('--cursor', cursor);
  return words.map(shellWord).join(' ');
}

export const ACTOR: OptionSpec = {
  name: 'actor',
  kind: 'string',
  valueName: 'A',
  description: 'Who is acting, recorded with the change (default: your OS user name).',
};

export const REASON: OptionSpec = {
  name: 'reason',
  kind: 'string',
  valueName: 'TEXT',
  description: 'Why, recorded with the change (at most 1000 characters).',
};

/** `--actor`, else the OS user name; undefined when the system cannot say who is logged in. */
export function actorOf(args: ParsedArguments): string | undefined {
  const given = args.string('actor');
  if (given !== undefined) return given;
  try {
    return userInfo().username || undefined;
  } catch {
    return undefined;
  }
}

/** `--actor` and `--reason` as Admin takes them, leaving out what is absent. */
export function actorOptions(args: ParsedArguments): { actor?: string; reason?: string } {
  const actor = actorOf(args);
  const reason = args.string('reason');
  return { ...(actor !== undefined && { actor }), ...(reason !== undefined && { reason }) };
}

// A date alone means UTC midnight; a time must say its zone, so the same line means the same
// instant on every machine.
const ISO_TIME = /^\d{4}-\d\d-\d\d(?:T\d\d:\d\d(?::\d\d(?:\.\d{1,9})?)?(?:Z|[+-]\d\d:?\d\d))?$/i;

/** An ISO 8601 option (`--finished-after`) as a Date; anything else is a usage error. */
export function timeOf(args: ParsedArguments, name: string): Date | undefined {
  const value = args.string(name);
  if (value === undefined) return undefined;
  const date = new Date(ISO_TIME.test(value) ? value.toUpperCase() : Number.NaN);
  if (Number.isNaN(date.getTime())) throw new CliUsageError(messages.badTime(`--${name}`, value));
  return date;
}
