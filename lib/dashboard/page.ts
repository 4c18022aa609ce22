import type { IncomingMessage } from 'node:http';
import type { Admin } from '../core/admin';
import type { HealthThresholds } from '../core/operator/health';
import type { DashboardAction } from './dashboard-actions';
import type { Html } from './html';

/** What a page shows: its title and its main content (the layout adds the rest). */
export interface PageView {
  title: string;
  body: Html;
  /** HTTP status of the page; default 200. */
  status?: number;
}

/** A file a page answers with instead of a view (a job's whole payload as JSON). */
export interface FileView {
  file: { name: string; contentType: string; body: string };
}

/** A page's answer that sends the browser elsewhere (the search box jumping to a job). */
export interface RedirectView {
  /** Relative to the current page, as `context.href` makes it. */
  redirect: string;
}

/** A page's answer as JSON (the read-only API under `api/`). */
export interface JsonView {
  json: unknown;
  status?: number;
}

/** A value for a query parameter of a link: left out when undefined or empty. */
export type QueryValue = string | number | readonly string[] | undefined | null;

/** Everything a page may use to answer one request. */
export interface PageContext {
  readonly request: IncomingMessage;
  readonly admin: Admin;
  /** The values of the route's `:name` segments, decoded. */
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  readonly now: Date;
  /** True for a live refresh: reads are shared with the other viewers' refreshes (see shared-reads.ts). */
  readonly live: boolean;
  /** True when changes are switched off for the whole dashboard. */
  readonly readOnly: boolean;
  /** The thresholds the overview reads `admin.health()` with (the `health` option). */
  readonly healthThresholds: HealthThresholds;
  /** The CSRF token every change form carries (see `changeForm`). */
  readonly csrfToken: string;
  /**
   * A link to a dashboard path (`jobs`, `jobs/<id>`), relative to the current page, so the
   * dashboard works under any mount point and behind proxies that add a prefix.
   */
  href(path: string, query?: Record<string, QueryValue>): string;
  /** Asks `authorize` (once per action and request). */
  can(action: DashboardAction): Promise<boolean>;
  /** True when the viewer may do the change: not read-only, and `authorize` allows it. */
  mayChange(action: DashboardAction): Promise<boolean>;
  /** Memoises `load` under `key` for `ttlMs` across requests (reads that many viewers repeat). */
  cached<T>(key: string, ttlMs: number, load: () => Promise<T>): Promise<T>;
}

/** The context of a change: the posted form and who is acting. */
export interface ActionContext extends PageContext {
  readonly form: URLSearchParams;
  /** Recorded with the change (the `actor` option). */
  readonly actor: string;
}

/** What a change answers: a redirect (Post/Redirect/Get) or a page of its own (a preview, a result). */
export type ActionResult = { redirect: string } | { view: PageView };

/** A change a page offers, posted to the page's own route with the field `do` set to its name. */
export interface PageAction {
  /** What `authorize` is asked before it runs. */
  action: DashboardAction;
  run(context: ActionContext): Promise<ActionResult>;
}

/**
 * One page of the dashboard: a route, a view and the changes it offers. Adding a page (the
 * schedules, workers and human-wait pages to come) is one more entry in `DASHBOARD_PAGES`.
 */
export interface DashboardPage {
  /** Path below the mount point, with `:name` segments: `''` (overview), `jobs`, `jobs/:id`. */
  route: string;
  /** Label in the navigation bar; pages without one are reached by links. */
  nav?: string;
  /** The page shows changing state: dashboard.js refreshes it by itself (see docs/dashboard.md, Live pages). */
  live?: boolean;
  render(context: PageContext): Promise<PageView | FileView | RedirectView | JsonView>;
  /** Changes, by the name the form posts in its `do` field. */
  actions?: Readonly<Record<string, PageAction>>;
}

/**
 * The change a form's `do` names among the page's own actions, or null: a name inherited from
 * `Object.prototype` (`__proto__`, `constructor`) is no action.
 */
export function actionOf(page: DashboardPage, name: string | null): PageAction | null {
  if (name === null || page.actions === undefined || !Object.hasOwn(page.actions, name)) return null;
  return page.actions[name];
}

/** A page an incoming path matched, with the values of its `:name` segments. */
export interface MatchedPage {
  page: DashboardPage;
  params: Record<string, string>;
}

/**
 * The page whose route matches a dashboard path (`/jobs/abc`), or null. A segment that is not
 * valid percent-encoding matches nothing.
 */
export function matchPage(pages: readonly DashboardPage[], path: string): MatchedPage | null {
  const segments = path.split('/').filter((segment) => segment !== '');
  for (const page of pages) {
    const pattern = page.route.split('/').filter((segment) => segment !== '');
    if (pattern.length !== segments.length) continue;
    const params: Record<string, string> = {};
    let matched = true;
    for (let i = 0; i < pattern.length && matched; i += 1) {
      if (pattern[i].startsWith(':')) {
        try {
          params[pattern[i].slice(1)] = decodeURIComponent(segments[i]);
        } catch {
          matched = false;
        }
      } else {
        matched = pattern[i] === segments[i];
      }
    }
    if (matched) return { page, params };
  }
  return null;
}
