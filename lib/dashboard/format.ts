import type { JobState, JsonValue } from '../core/types';
import { html, type Html } from './html';

/** How much of a value a page shows inline; the rest is a download away. */
export const INLINE_JSON_CHARS = 64 * 1024;

function pad(value: number): string {
  return String(value).padStart(2, '0');
}

/** `2026-11-30 15:37:51 UTC`: the one form of a time on every page, in the zone of the charts and the time filters. */
export function utcText(date: Date): string {
  return `${date.getUTCFullYear()}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())} ${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())} UTC`;
}

/** A `<time>` element, or a dash for no time. */
export function time(date: Date | null | undefined): Html {
  if (!date) return html`<span class="muted">-</span>`;
  return html`<time datetime="${date.toISOString()}">${utcText(date)}</time>`;
}

/** `3 min ago`, `in 12 s`: how far a time is from now, roughly. */
export function relative(date: Date, now: Date): string {
  const seconds = Math.round((date.getTime() - now.getTime()) / 1000);
  const size = Math.abs(seconds);
  const amount =
    size < 90 ? `${size} s` : size < 5400 ? `${Math.round(size / 60)} min` : size < 172_800 ? `${Math.round(size / 3600)} h` : `${Math.round(size / 86_400)} d`;
  return seconds < 0 ? `${amount} ago` : `in ${amount}`;
}

export function stateBadge(state: JobState): Html {
  return html`<span class="state state-${state}">${state}</span>`;
}

/** Text cut to `max` characters, with an ellipsis when cut. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** Pretty-printed JSON in a `<pre>`, cut at {@link INLINE_JSON_CHARS} with a note saying so. */
export function jsonBlock(value: JsonValue | null | undefined, downloadHref?: string): Html {
  if (value === undefined) return html`<p class="muted">None.</p>`;
  const text = JSON.stringify(value, null, 2);
  const cut = text.length > INLINE_JSON_CHARS;
  return html`<pre class="json">${cut ? text.slice(0, INLINE_JSON_CHARS) : text}</pre>
    ${cut && html`<p class="muted">Showing the first ${INLINE_JSON_CHARS.toLocaleString('en')} of ${text.length.toLocaleString('en')} characters.
      ${downloadHref && html`<a href="${downloadHref}" download>Download the whole value</a>.`}</p>`}`;
}

/** The place of a value the viewer may not see. */
export function redacted(what: string): Html {
  return html`<p class="redacted">${what} hidden: viewing job data needs the <code>read-data</code> permission.</p>`;
}

function isErrorEnvelope(value: JsonValue): value is { name: string; message: string } {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && typeof value.name === 'string' && typeof value.message === 'string';
}

/**
 * A short, one-line rendering of a timeline entry's data: `name="charge"`, an error as
 * `error=Name: message` (its stack is on the job's page), an attempt's times as its duration.
 */
export function inlineData(data: { [key: string]: JsonValue } | null): string {
  if (data === null) return '';
  const { startedAt, finishedAt, ...rest } = data;
  const parts = Object.entries(rest)
    .filter(([, value]) => value !== null)
    .map(([key, value]) => {
      if (isErrorEnvelope(value)) return `${key}=${truncate(`${value.name}: ${value.message}`, 300)}`;
      return `${key}=${typeof value === 'string' ? JSON.stringify(truncate(value, 300)) : truncate(JSON.stringify(value), 300)}`;
    });
  if (typeof startedAt === 'string' && typeof finishedAt === 'string') {
    const took = Date.parse(finishedAt) - Date.parse(startedAt);
    if (Number.isFinite(took)) parts.unshift(`took=${took} ms`);
  }
  return parts.join(' ');
}

/**
 * The login role (`session_user`) of the session that made a change, shown next to the
 * caller-chosen actor, as on the job timeline; nothing for a change made before it was recorded.
 */
export function loginRole(role: string | null): Html {
  return role === null ? html`` : html` <span class="login-role">login role <code>${role}</code></span>`;
}
