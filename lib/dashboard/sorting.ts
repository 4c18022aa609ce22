import { html, type Html } from './html';
import type { PageContext } from './page';

// Sortable columns, for the lists a page holds whole in memory (queues, workers): sorting them
// costs nothing in the database. Listings paged through an index (jobs, dead letters) keep the
// index's order (newest first), since another order would have to sort the whole history.

/** A column that can be sorted: its heading and the value rows are ordered by. */
export interface SortColumn<T> {
  key: string;
  label: string;
  value(row: T): string | number;
  /** The order a first click gives: numbers and times read best largest first. */
  firstDir?: 'asc' | 'desc';
}

export interface Sorted<T> {
  rows: T[];
  /** The table's headings: sortable ones are links that sort by them (again: the other way). */
  head: Html[];
}

/** Sorts `rows` by `?sort=<key>&dir=asc|desc` (or keeps their order) and makes the headings. */
export function sortRows<T>(context: PageContext, route: string, rows: readonly T[], columns: ReadonlyArray<SortColumn<T> | string>): Sorted<T> {
  const key = context.query.get('sort');
  const dir = context.query.get('dir') === 'desc' ? 'desc' : 'asc';
  const column = columns.find((c): c is SortColumn<T> => typeof c !== 'string' && c.key === key);
  const sorted = [...rows];
  if (column) {
    const sign = dir === 'desc' ? -1 : 1;
    sorted.sort((a, b) => {
      const x = column.value(a);
      const y = column.value(b);
      return sign * (typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y)));
    });
  }
  const head = columns.map((c) => {
    if (typeof c === 'string') return html`${c}`;
    const current = column === c;
    const next = current ? (dir === 'asc' ? 'desc' : 'asc') : (c.firstDir ?? 'asc');
    return html`<a class="sort" href="${context.href(route, { sort: c.key, dir: next })}"${current ? html` aria-sort="${dir === 'asc' ? 'ascending' : 'descending'}"` : ''}>${c.label}${current ? (dir === 'asc' ? ' ▲' : ' ▼') : ''}</a>`;
  });
  return { rows: sorted, head };
}
