import { InvalidCursorError } from './errors';

/**
 * A caller's cursor, passed to the SQL as it is (the database makes every listing's cursors and
 * refuses one it did not make, P1001 naming `cursor`); only what is not text is refused here.
 * No cursor: null.
 */
export function checkCursor(cursor: unknown): string | null {
  if (cursor === undefined || cursor === null) return null;
  if (typeof cursor !== 'string') throw new InvalidCursorError();
  return cursor;
}
