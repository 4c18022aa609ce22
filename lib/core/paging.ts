import type { Page } from './types';

/** The most rows one call of a listing function of the SQL protocol returns. */
const MOST_ROWS = 1000;

/**
 * One page of a listing, and whether another follows: the SQL is asked for one row more than the
 * page shows, and a next cursor is given only when that row exists, so a listing that exactly
 * fills its last page ends there instead of pointing at an empty page. A page of the most rows
 * the SQL returns is followed by a read of one row after it instead. `read(count, after)` reads
 * `count` rows from the caller's cursor, or from just after the row `after`.
 */
export async function readPage<R, T>(
  limit: number,
  read: (count: number, after: R | null) => Promise<R[]>,
  item: (row: R) => T,
  cursorAfter: (last: R) => string,
): Promise<Page<T>> {
  let rows: R[];
  let more: boolean;
  if (limit < MOST_ROWS) {
    const read1 = await read(limit + 1, null);
    rows = read1.slice(0, limit);
    more = read1.length > limit;
  } else {
    rows = await read(limit, null);
    more = rows.length === limit && (await read(1, rows[rows.length - 1])).length > 0;
  }
  return { items: rows.map(item), nextCursor: more ? cursorAfter(rows[rows.length - 1]) : null };
}
