import type { AssetFile, DashboardAsset } from './assets';
import { CSRF_FIELD } from './csrf';
import { html, type Html, type HtmlValue } from './html';
import { DashboardHttpError } from './http-request';
import type { DashboardPage, PageContext, PageView } from './page';

/** Messages a change may ask the next page to show (`?notice=paused`): a closed list, never text from the URL. */
export const NOTICES = {
  paused: 'The queue is paused: workers claim nothing from it until it is resumed.',
  resumed: 'The queue is resumed.',
  canceled: 'The job is canceled.',
  'cancel-requested': 'Cancel requested: the worker stops the handler, and the job ends canceled.',
  'already-terminal': 'The job had already ended; nothing was changed.',
  redriven: 'This job was created by the redrive.',
  decided: 'The decision is recorded: the job goes on with it at its next run.',
  'schedule-paused': 'The schedule is paused: its occurrences are skipped until it is resumed.',
  'schedule-resumed': 'The schedule is resumed from its next occurrence.',
  'schedule-unchanged': 'The schedule was already in that state; nothing was changed.',
  triggered: 'This job was enqueued by triggering its schedule now.',
  'drain-requested': 'Drain requested: the worker stops claiming within its heartbeat interval and finishes what it holds.',
  'drain-already-requested': 'That worker had been asked to drain before; the first request stands.',
  'worker-not-found': 'That worker is no longer registered; nothing was changed.',
  'limits-set': 'The queue\u2019s limits are set: they apply from the next claim.',
  'ran-now': 'The job is ready now: the next free worker runs it.',
  deleted: 'The job is deleted, with what referenced it; its history stays until retention drops its day.',
} as const;

export type Notice = keyof typeof NOTICES;

function noticeOf(query: URLSearchParams): string | null {
  const code = query.get('notice');
  return code !== null && Object.hasOwn(NOTICES, code) ? NOTICES[code as Notice] : null;
}

export interface LayoutInput {
  view: PageView;
  context: PageContext;
  pages: readonly DashboardPage[];
  /** The route of the page being shown (its nav entry is marked current). */
  route: string | null;
  assets: ReadonlyMap<AssetFile, DashboardAsset>;
}

/** The whole document around a page's view: head, navigation, notice, main. */
export function layout({ view, context, pages, route, assets }: LayoutInput): Html {
  const asset = (file: AssetFile): string => context.href(`assets/${assets.get(file)?.name ?? file}`);
  const notice = noticeOf(context.query);
  const live = pages.find((page) => page.route === route)?.live === true;
  const nav = pages
    .filter((page) => page.nav !== undefined)
    .map((page) => html`<a href="${context.href(page.route)}"${page.route === route ? html` aria-current="page"` : ''}>${page.nav}</a>`);
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<link rel="icon" href="data:,">
<title>${view.title} · Workhorse</title>
<link rel="stylesheet" href="${asset('dashboard.css')}">
<script src="${asset('dashboard.js')}" defer></script>
</head>
<body${live ? html` data-live="5"` : ''}>
<header class="top">
  <a class="brand" href="${context.href('')}">Workhorse</a>
  <nav>${nav}</nav>
  ${context.readOnly && html`<span class="badge">read-only</span>`}
  <span class="controls" id="controls"></span>
</header>
<main>
  <h1>${view.title}</h1>
  ${notice && html`<p class="notice" role="status">${notice}</p>`}
  <div id="live-body">${view.body}</div>
</main>
</body>
</html>
`;
}

export interface ChangeFormOptions {
  /** The page route the form posts to (its actions handle it). */
  route: string;
  /** The action's name in the page's `actions`. */
  name: string;
  /** Shown by the browser script before the form is sent. */
  confirm?: string;
  className?: string;
}

/** A form that posts a change: carries the CSRF token and the action's name. */
export function changeForm(context: PageContext, options: ChangeFormOptions, fields: HtmlValue): Html {
  return html`<form method="post" action="${context.href(options.route)}" class="${options.className ?? 'change'}"${options.confirm ? html` data-confirm="${options.confirm}"` : ''}>
<input type="hidden" name="${CSRF_FIELD}" value="${context.csrfToken}"><input type="hidden" name="do" value="${options.name}">${fields}</form>`;
}

/** The reason field of a change form: required, recorded in the timeline with the actor; `value` is what was typed before a refusal. */
export function reasonField(placeholder: string, value = ''): Html {
  return html`<label class="reason">Reason <input name="reason" required maxlength="1000" placeholder="${placeholder}"${value && html` value="${value}"`}></label>`;
}

/** The reason a change form posted, checked: 1 to 1000 characters. */
export function reasonOf(form: URLSearchParams): string {
  const reason = (form.get('reason') ?? '').trim();
  if (reason.length === 0 || reason.length > 1000) {
    throw new DashboardHttpError(400, 'Give a reason of 1 to 1000 characters: it is recorded with the change.');
  }
  return reason;
}

/** A `<table>` of rows, or a line saying there are none. */
export function table(head: readonly HtmlValue[], rows: readonly Html[], empty: string): Html {
  if (rows.length === 0) return html`<p class="muted">${empty}</p>`;
  return html`<div class="table-wrap"><table><thead><tr>${head.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${rows}</tbody></table></div>`;
}
