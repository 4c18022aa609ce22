import { WorkhorseValidationError } from '../../core/errors';
import { JOB_STATES, type JobState } from '../../core/types';
import { checkName } from '../../core/validation';
import { html, type Html } from '../html';
import type { PageContext } from '../page';

// What the listing pages (jobs, dead letters) share: filters read from the query string, where a
// bad value is a WorkhorseValidationError naming the parameter, which the page shows next to
// its form (status 400), and the pager under the listing.

export function optionalName(query: URLSearchParams, field: string): string | undefined {
  const value = query.get(field)?.trim();
  return value ? checkName(value, field) : undefined;
}

export function optionalText(query: URLSearchParams, field: string, max: number): string | undefined {
  const value = query.get(field)?.trim();
  if (!value) return undefined;
  if (value.length > max) throw new WorkhorseValidationError(field, `must be at most ${max} characters`);
  return value;
}

/** A time from a `datetime-local` field, read as UTC (`2026-11-30T15:37`), or an ISO time. */
export function optionalTime(query: URLSearchParams, field: string): Date | undefined {
  const value = query.get(field)?.trim();
  if (!value) return undefined;
  const date = new Date(/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?$/.test(value) ? `${value}Z` : value);
  if (Number.isNaN(date.getTime())) throw new WorkhorseValidationError(field, 'must be a time such as 2026-11-30T15:37 (UTC)');
  return date;
}

/** The value a `datetime-local` field shows for a time (UTC, to the minute). */
export function timeFieldValue(date: Date | undefined): string {
  return date ? date.toISOString().slice(0, 16) : '';
}

export function states(query: URLSearchParams): JobState[] | undefined {
  const values = query.getAll('state').filter((value) => value !== '');
  if (values.length === 0) return undefined;
  for (const value of values) {
    if (!(JOB_STATES as readonly string[]).includes(value)) {
      throw new WorkhorseValidationError('state', `must be one of ${JOB_STATES.join(', ')}`);
    }
  }
  return [...new Set(values)] as JobState[];
}

/** Page size from `limit`: one of the sizes offered, default 50. */
export function pageSize(query: URLSearchParams): number {
  const value = Number(query.get('limit'));
  return [25, 50, 100].includes(value) ? value : 50;
}

/**
 * The links under a listing: back to its newest page when a cursor is in the URL, and on to the
 * next page (`next` names that link). The filters in the URL are kept.
 */
export function pager(context: PageContext, route: string, nextCursor: string | null, next: string): Html {
  const filters = Object.fromEntries([...context.query.keys()].filter((key) => key !== 'cursor').map((key) => [key, context.query.getAll(key)]));
  return html`<nav class="pager">
    ${context.query.has('cursor') && html`<a href="${context.href(route, filters)}">Newest</a>`}
    ${nextCursor && html`<a href="${context.href(route, { ...filters, cursor: nextCursor })}" rel="next">${next}</a>`}
  </nav>`;
}
