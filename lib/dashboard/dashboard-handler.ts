import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Admin } from '../core/admin';
import { WorkhorseValidationError } from '../core/errors';
import { AllowedHosts, hostNameOf } from './allowed-hosts';
import { loadAssets, type AssetFile, type DashboardAsset } from './assets';
import { DASHBOARD_ACTIONS, isDashboardMutation, type DashboardAction } from './dashboard-actions';
import { DASHBOARD_MESSAGES } from './dashboard.messages';
import { resolveDashboardOptions, type DashboardOptions, type ResolvedDashboardOptions } from './dashboard-options';
import { CSRF_FIELD, CsrfTokens } from './csrf';
import { html, type Html } from './html';
import { DashboardHttpError, isEncrypted, isSameOrigin, locate, readForm, type DashboardLocation } from './http-request';
import { layout } from './layout';
import { actionOf, matchPage, type DashboardPage, type PageContext, type PageView, type QueryValue } from './page';
import { DASHBOARD_PAGES } from './pages';
import { sharedReads } from './shared-reads';

/**
 * A request handler in the shape every Node server accepts: `(request, response, next?)`.
 * Requests outside the dashboard's path go to `next` (a 404 without one).
 */
export type DashboardHandler = (request: IncomingMessage, response: ServerResponse, next?: (error?: unknown) => void) => Promise<void>;

// Pages hold job data: never cached, never framed, no script or style from anywhere else.
const PAGE_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

const ACTOR_MAX = 200;

const ERROR_TITLES: Partial<Record<number, string>> = { 403: 'Not allowed', 404: 'Not found', 421: 'Not served on this host' };

interface Cached {
  expires: number;
  value: Promise<unknown>;
}

/** Relative prefix from a dashboard path to the dashboard's root: `./` for `/jobs`, `../` for `/jobs/<id>`. */
function rootOf(path: string): string {
  const depth = path.split('/').length - 2;
  return depth <= 0 ? './' : '../'.repeat(depth);
}

function queryString(query: Record<string, QueryValue> | undefined): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null || value === '') continue;
    for (const item of Array.isArray(value) ? value : [String(value)]) params.append(key, item);
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** The read-only JSON API's paths: answers and errors are JSON there. */
function isApi(path: string): boolean {
  return path === '/api' || path.startsWith('/api/');
}

function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

class Dashboard {
  private readonly csrf: CsrfTokens;
  private readonly assets: ReadonlyMap<AssetFile, DashboardAsset>;
  private readonly assetsByName: ReadonlyMap<string, DashboardAsset>;
  private readonly cache = new Map<string, Cached>();
  private readonly hosts: AllowedHosts;
  /** What live refreshes read through: one query set per interval for every viewer of the process. */
  private readonly shared: Admin;

  constructor(
    private readonly options: ResolvedDashboardOptions,
    private readonly pages: readonly DashboardPage[],
  ) {
    this.csrf = new CsrfTokens(options.secret);
    this.hosts = new AllowedHosts(options.allowedHosts);
    this.shared = sharedReads(options.admin);
    this.assets = loadAssets();
    this.assetsByName = new Map([...this.assets.values()].map((asset) => [asset.name, asset]));
  }

  async handle(request: IncomingMessage, response: ServerResponse, next?: (error?: unknown) => void): Promise<void> {
    const location = locate(request, this.options.path);
    if (location === null) {
      if (next) next();
      else this.send(response, 404, 'text/plain; charset=utf-8', 'Not found');
      return;
    }
    try {
      await this.serve(request, response, location);
    } catch (error) {
      this.fail(request, response, location, error);
    }
  }

  private async serve(request: IncomingMessage, response: ServerResponse, location: DashboardLocation): Promise<void> {
    const method = request.method ?? 'GET';
    const host = hostNameOf(request);
    const verdict = this.hosts.verdict(host);
    if (verdict === 'refused') throw new DashboardHttpError(421, DASHBOARD_MESSAGES.hostRefused(host));
    const decisions = new Map<DashboardAction, Promise<boolean>>();
    const can = (action: DashboardAction): Promise<boolean> => {
      // A page asks only for actions of the closed list: anything else is a defect, never a question for the hook.
      if (!DASHBOARD_ACTIONS.includes(action)) return Promise.reject(new Error(`the dashboard asked about an unknown action ${String(action)}`));
      let decision = decisions.get(action);
      if (!decision) {
        decision = Promise.resolve(this.options.authorize(request, action)).then((allowed) => allowed === true);
        decisions.set(action, decision);
      }
      return decision;
    };
    // Every answer but the wrong host's is for readers only: the bare mount's redirect and a 405 too.
    if (!(await can('read'))) throw new DashboardHttpError(403, DASHBOARD_MESSAGES.readRefused);
    if (verdict === 'first' && !this.hosts.keep(host as string)) throw new DashboardHttpError(421, DASHBOARD_MESSAGES.hostRefused(host));

    if (location.bare) {
      // Relative links need the trailing slash: /workhorse -> /workhorse/ (relative, so proxies' prefixes survive).
      const last = this.options.path.slice(this.options.path.lastIndexOf('/') + 1);
      response.setHeader('Location', `${last}/${location.query.size > 0 ? `?${location.query}` : ''}`);
      this.headers(response);
      this.send(response, 308, 'text/plain; charset=utf-8', 'Moved');
      return;
    }
    if (!['GET', 'HEAD', 'POST'].includes(method)) {
      response.setHeader('Allow', 'GET, HEAD, POST');
      throw new DashboardHttpError(405, DASHBOARD_MESSAGES.methodNotAllowed);
    }

    if (isApi(location.path) && method === 'POST') {
      // The JSON API only reads: nothing under api/ accepts a change.
      response.setHeader('Allow', 'GET, HEAD');
      throw new DashboardHttpError(405, DASHBOARD_MESSAGES.methodNotAllowed);
    }
    if (location.path.startsWith('/assets/')) {
      this.asset(response, location.path.slice('/assets/'.length), method);
      return;
    }

    const matched = matchPage(this.pages, location.path);
    if (matched === null) throw new DashboardHttpError(404, DASHBOARD_MESSAGES.notFound);
    const cookieNonce = this.csrf.nonceOf(request);
    const nonce = cookieNonce ?? this.csrf.newNonce();
    if (cookieNonce === null) response.setHeader('Set-Cookie', this.csrf.cookie(nonce, isEncrypted(request)));
    const root = rootOf(location.path);
    // A page refreshing by itself (dashboard.js asks with this header) reads what every other
    // viewer's refresh reads: shared for a moment. What a person opens or reloads is read fresh.
    const live = method !== 'POST' && request.headers['x-workhorse-live'] === '1' && matched.page.live === true;
    const context: PageContext = {
      request,
      admin: live ? this.shared : this.options.admin,
      live,
      params: matched.params,
      query: location.query,
      now: new Date(),
      readOnly: this.options.readOnly,
      healthThresholds: this.options.health,
      csrfToken: this.csrf.tokenFor(nonce),
      href: (path, query) => `${root}${encodePath(path)}${queryString(query)}`,
      can,
      mayChange: async (action) => !this.options.readOnly && (await can(action)),
      cached: (key, ttlMs, load) => this.cached(key, ttlMs, load),
    };

    if (method === 'POST') {
      await this.change(response, matched.page, context, cookieNonce);
      return;
    }

    const view = await matched.page.render(context);
    if ('redirect' in view) {
      response.setHeader('Location', view.redirect);
      this.headers(response);
      this.send(response, 303, 'text/plain; charset=utf-8', 'See other');
      return;
    }
    if ('json' in view) {
      this.headers(response);
      this.send(response, view.status ?? 200, 'application/json; charset=utf-8', `${JSON.stringify(view.json, null, 2)}\n`, method === 'HEAD');
      return;
    }
    if ('file' in view) {
      response.setHeader('Content-Disposition', `attachment; filename="${view.file.name.replace(/[^\w.-]/g, '_')}"`);
      this.headers(response);
      this.send(response, 200, `${view.file.contentType}; charset=utf-8`, view.file.body, method === 'HEAD');
      return;
    }
    this.page(response, context, matched.page.route, view, method === 'HEAD');
  }

  private asset(response: ServerResponse, name: string, method: string): void {
    const asset = this.assetsByName.get(name);
    if (!asset || method === 'POST') throw new DashboardHttpError(404, DASHBOARD_MESSAGES.notFound);
    response.setHeader('Cache-Control', 'public, max-age=31536000, immutable');
    response.setHeader('X-Content-Type-Options', 'nosniff');
    this.send(response, 200, asset.contentType, asset.body, method === 'HEAD');
  }

  /**
   * A posted change, in the order of its checks: the page offers it; the dashboard is not
   * read-only; the form comes from the dashboard's own origin and carries the token of this
   * browser's cookie; `authorize` allows the action. Then it runs, with the actor.
   */
  private async change(response: ServerResponse, page: DashboardPage, context: PageContext, cookieNonce: string | null): Promise<void> {
    const { request } = context;
    const form = await readForm(request);
    const action = actionOf(page, form.get('do'));
    if (action === null) throw new DashboardHttpError(400, DASHBOARD_MESSAGES.unknownChange);
    if (isDashboardMutation(action.action) && this.options.readOnly) throw new DashboardHttpError(403, DASHBOARD_MESSAGES.readOnly);
    if (!isSameOrigin(request, this.options.trustedOrigins)) throw new DashboardHttpError(403, DASHBOARD_MESSAGES.crossOrigin);
    if (!this.csrf.verify(cookieNonce, form.get(CSRF_FIELD) ?? undefined)) throw new DashboardHttpError(403, DASHBOARD_MESSAGES.staleForm);
    if (!(await context.can(action.action))) throw new DashboardHttpError(403, DASHBOARD_MESSAGES.changeRefused(action.action));
    const actor = await this.options.actor(request);
    if (typeof actor !== 'string' || actor.length === 0 || actor.length > ACTOR_MAX) {
      throw new Error(DASHBOARD_MESSAGES.badActor(ACTOR_MAX));
    }
    const result = await action.run({ ...context, form, actor });
    if ('redirect' in result) {
      response.setHeader('Location', result.redirect);
      this.headers(response);
      this.send(response, 303, 'text/plain; charset=utf-8', 'See other');
    } else {
      this.page(response, context, page.route, result.view, false);
    }
  }

  private page(response: ServerResponse, context: PageContext, route: string | null, view: PageView, headOnly: boolean): void {
    this.headers(response);
    const document = layout({ view, context, pages: this.pages, route, assets: this.assets });
    this.send(response, view.status ?? 200, 'text/html; charset=utf-8', document.toString(), headOnly);
  }

  private fail(request: IncomingMessage, response: ServerResponse, location: DashboardLocation, error: unknown): void {
    let status = 500;
    let message: string = DASHBOARD_MESSAGES.internal;
    if (error instanceof DashboardHttpError) {
      status = error.status;
      message = error.message;
    } else if (error instanceof WorkhorseValidationError) {
      status = 400;
      message = error.message;
    } else {
      this.options.onError(error);
    }
    if (response.headersSent) {
      response.destroy();
      return;
    }
    if (isApi(location.path)) {
      this.headers(response);
      const json = `${JSON.stringify({ error: { status, field: null, message } })}\n`;
      this.send(response, status, 'application/json; charset=utf-8', json, request.method === 'HEAD');
      return;
    }
    // An error page knows nothing of the viewer's rights, so it shows no navigation and no data.
    const body: Html = html`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${status} · Workhorse</title>
<link rel="stylesheet" href="${rootOf(location.path)}assets/${this.assets.get('dashboard.css')?.name ?? ''}"></head>
<body><main class="error-page"><h1>${ERROR_TITLES[status] ?? 'Something went wrong'}</h1>
<p>${message}</p><p><a href="${rootOf(location.path)}">Back to the dashboard</a></p></main></body></html>`;
    this.headers(response);
    if (status === 413) response.setHeader('Connection', 'close');
    this.send(response, status, 'text/html; charset=utf-8', body.toString(), request.method === 'HEAD');
  }

  private headers(response: ServerResponse): void {
    for (const [name, value] of Object.entries(PAGE_HEADERS)) response.setHeader(name, value);
  }

  private send(response: ServerResponse, status: number, contentType: string, body: string | Buffer, headOnly = false): void {
    response.statusCode = status;
    response.setHeader('Content-Type', contentType);
    response.setHeader('Content-Length', typeof body === 'string' ? Buffer.byteLength(body) : body.length);
    response.end(headOnly ? undefined : body);
  }

  private cached<T>(key: string, ttlMs: number, load: () => Promise<T>): Promise<T> {
    const now = Date.now();
    for (const [name, entry] of this.cache) if (entry.expires <= now) this.cache.delete(name);
    const hit = this.cache.get(key);
    if (hit) return hit.value as Promise<T>;
    const value = load();
    this.cache.set(key, { expires: now + ttlMs, value });
    // A failed read is not kept: the next viewer tries again.
    value.catch(() => this.cache.delete(key));
    return value;
  }
}

/**
 * The dashboard as a plain Node request handler, for any server: `http.createServer`, Express
 * (`app.use(handler)`), Fastify (see docs/dashboard.md), or Nest through
 * `WorkhorseDashboardModule`. Pages are rendered on the server; the stylesheet and the small
 * script ship with the package and are served by the handler itself (no CDN, no external font).
 *
 * @example
 * const dashboard = createDashboardHandler({
 *   admin: new Admin(pool),
 *   path: '/workhorse',
 *   authorize: (request, action) => action === 'read' || request.headers['x-operator'] === 'yes',
 * });
 * http.createServer((request, response) => void dashboard(request, response)).listen(3000);
 */
export function createDashboardHandler(options: DashboardOptions): DashboardHandler {
  const dashboard = new Dashboard(resolveDashboardOptions(options), DASHBOARD_PAGES);
  return (request, response, next) => dashboard.handle(request, response, next);
}
