/**
 * The migration steps this package ships: `sql/migrations/NNNN_<slug>.sql`, where NNNN is the
 * schema version the step leads to from the one before (docs/upgrading.md). Read from disk
 * once, checked for gaps and duplicates, and split into statements when a step must run
 * outside a transaction.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The first version an upgrade starts from: schema version 4, the `sql/` of the release before
 * migrations existed. No database holds an older migratable version.
 */
export const BASELINE_SCHEMA_VERSION = 4;

/** A step's first line, when the step cannot run inside a transaction (CREATE INDEX CONCURRENTLY). */
export const NO_TRANSACTION_MARKER = '-- workhorse:no-transaction';

const STEP_FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** One migration step, as `schema status` lists it. */
export interface MigrationStepInfo {
  /** The version the step leads to (from `version - 1`). */
  version: number;
  /** The file's slug: `migration_log` for `0005_migration_log.sql`. */
  name: string;
  /** False for a step marked `-- workhorse:no-transaction`, which runs statement by statement. */
  transactional: boolean;
}

/** One migration step with its SQL. */
export interface MigrationStep extends MigrationStepInfo {
  /** The step's file name inside the migrations directory. */
  file: string;
  /** The file's text. */
  sql: string;
}

/** The migration files on disk do not make one gapless sequence after the baseline. */
export class MigrationFilesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * Reads and checks the steps in `dir`, in version order. Every file must be named
 * `NNNN_<slug>.sql` (lower-case slug), the versions must run from the baseline + 1 upwards
 * without a gap or a duplicate. A missing directory holds no steps.
 */
export function readMigrationSteps(dir: string): MigrationStep[] {
  if (!existsSync(dir)) return [];
  const names = readdirSync(dir).filter((name) => name.endsWith('.sql')).sort();
  const steps = names.map((file) => {
    const match = STEP_FILE.exec(file);
    if (!match) {
      throw new MigrationFilesError(`${join(dir, file)}: a migration step is named NNNN_<slug>.sql (four digits, then lower-case letters, digits, _)`);
    }
    const sql = readFileSync(join(dir, file), 'utf8');
    const transactional = sql.split('\n', 1)[0].trim() !== NO_TRANSACTION_MARKER;
    return { version: Number(match[1]), name: match[2], file, transactional, sql };
  });
  steps.forEach((step, index) => {
    const wanted = BASELINE_SCHEMA_VERSION + 1 + index;
    if (step.version !== wanted) {
      throw new MigrationFilesError(
        `${dir}: expected the step to version ${wanted} next, found ${step.file} ` +
          '(steps run from the baseline without gaps, one file per version)',
      );
    }
  });
  return steps;
}

/**
 * Splits a step's SQL into its statements, for a step that runs outside a transaction (a
 * multi-statement query would run inside an implicit one). Semicolons inside quotes,
 * quoted identifiers, dollar-quoted bodies and comments do not split.
 */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let start = 0;
  let i = 0;
  while (i < sql.length) {
    const rest = sql.slice(i);
    const previous = i > 0 ? sql[i - 1] : '';
    if (rest.startsWith('--')) {
      const end = sql.indexOf('\n', i);
      i = end === -1 ? sql.length : end + 1;
    } else if (rest.startsWith('/*')) {
      i = blockCommentEnd(sql, i);
    } else if (sql[i] === "'") {
      i = stringEnd(sql, i, /[Ee]/.test(previous) && !IDENTIFIER_CHAR.test(sql[i - 2] ?? ''));
    } else if (sql[i] === '"') {
      const end = sql.indexOf('"', i + 1);
      i = end === -1 ? sql.length : end + 1;
    } else if (sql[i] === '$' && !IDENTIFIER_CHAR.test(previous)) {
      const tag = DOLLAR_TAG.exec(rest)?.[0];
      if (tag) {
        const end = sql.indexOf(tag, i + tag.length);
        i = end === -1 ? sql.length : end + tag.length;
      } else {
        i += 1;
      }
    } else if (sql[i] === ';') {
      statements.push(sql.slice(start, i));
      i += 1;
      start = i;
    } else {
      i += 1;
    }
  }
  statements.push(sql.slice(start));
  return statements.filter((statement) => statement.replace(/--[^\n]*/g, '').trim() !== '');
}

/** A character that continues an identifier: a `$` after one is not a dollar quote (`a$b$`). */
const IDENTIFIER_CHAR = /[A-Za-z0-9_$\u0080-\uffff]/;

/** `$$` or `$tag$`, where a tag is an identifier without `$` (`$fn1$`). */
const DOLLAR_TAG = /^\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/;

/** Where the comment starting at `i` ends; block comments nest in PostgreSQL. */
function blockCommentEnd(sql: string, i: number): number {
  let depth = 0;
  while (i < sql.length) {
    if (sql.startsWith('/*', i)) {
      depth += 1;
      i += 2;
    } else if (sql.startsWith('*/', i)) {
      depth -= 1;
      i += 2;
      if (depth === 0) return i;
    } else {
      i += 1;
    }
  }
  return sql.length;
}

/** Where the string literal starting at `i` ends; in an E'' string a backslash escapes the next character. */
function stringEnd(sql: string, i: number, escapes: boolean): number {
  for (let j = i + 1; j < sql.length; j++) {
    if (escapes && sql[j] === '\\') j += 1;
    else if (sql[j] === "'") return j + 1;
  }
  return sql.length;
}
