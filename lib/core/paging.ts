import type { Page } from './types';

/** A row of a listing of the SQL protocol: the database makes the cursors (`make_cursor`). */
export interface PagedRow {
  next_cursor: string | null;
}

/**
 * One page of a listing: the rows the SQL function answered, of which the last, when the listing
 * goes on, only carries the cursor of the next page (the database decides whether another page
 * follows, so a listing that exactly fills its last page ends there).
 */
export function toPage<R extends PagedRow, T>(rows: R[], item: (row: R) => T): Page<T> {
  const nextCursor = rows.length > 0 ? rows[rows.length - 1].next_cursor : null;
  return { items: (nextCursor === null ? rows : rows.slice(0, -1)).map(item), nextCursor };
}
