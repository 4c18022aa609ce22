import { InvalidCursorError } from './errors';

/**
 * A caller's cursor, passed to the SQL as it is (the database makes cursors and refuses one it
 * did not make, P1001 naming `cursor`); only what is not text is refused here. No cursor: null.
 */
export function checkCursor(cursor: unknown): string | null {
  if (cursor === undefined || cursor === null) return null;
  if (typeof cursor !== 'string') throw new InvalidCursorError();
  return cursor;
}

// The children of a parent (listJobs with parentId) still page with a cursor made here: the
// listing is a client query (CHILDREN_SQL) that has no SQL function of its own yet.

// Cursors are opaque to callers: a tag that says which API issued them, and a position.
export function encodeCursor(kind: string, position: string): string {
  return Buffer.from(`${kind}:${position}`, 'utf8').toString('base64url');
}

const MAX_BIGINT = 9_223_372_036_854_775_807n;
const UUID_TEXT = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

// A position is a bigint (`jobs`, `timeline`) or a UTC time and a job id (`dead`); anything that
// does not decode to exactly that is refused before it reaches SQL.
export function decodeCursor(kind: string, cursor: unknown): string | null {
  if (cursor === undefined || cursor === null) return null;
  if (typeof cursor !== 'string') throw new InvalidCursorError();
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const pattern = kind === 'dead' ? `\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z/${UUID_TEXT}` : '\\d{1,19}';
  const match = new RegExp(`^${kind}:(${pattern})$`).exec(text);
  if (!match) throw new InvalidCursorError();
  const position = match[1];
  if (kind === 'dead') {
    // A real position: a time this API wrote (so within the years 1970 to 9999, which PostgreSQL
    // reads back; year 0000 is a valid JavaScript date but not a PostgreSQL one).
    const at = position.slice(0, 27);
    const ms = Date.parse(at);
    const year = Number(at.slice(0, 4));
    if (Number.isNaN(ms) || year < 1970 || new Date(ms).toISOString().slice(0, 23) !== at.slice(0, 23)) throw new InvalidCursorError();
  } else if (BigInt(position) > MAX_BIGINT) {
    throw new InvalidCursorError();
  }
  return position;
}
