import type { IncomingMessage } from 'node:http';

/** A request the dashboard refuses before any page sees it: the status and what to tell the user. */
export class DashboardHttpError extends Error {
  override readonly name = 'DashboardHttpError';

  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Where a request points inside the dashboard. */
export interface DashboardLocation {
  /** The path below the mount point, always starting with `/` (`/` for the overview, `/jobs/<id>`). */
  path: string;
  query: URLSearchParams;
  /** True for the mount point itself without its trailing slash (`/workhorse`). */
  bare: boolean;
}

const MAX_FORM_BYTES = 512 * 1024;

/**
 * The dashboard path of a request, or null when the request is not under the mount point. Reads
 * `originalUrl` where a framework rewrote `url` for a mounted router (Express, middie).
 */
export function locate(request: IncomingMessage, mountPath: string): DashboardLocation | null {
  const raw = (request as IncomingMessage & { originalUrl?: unknown }).originalUrl;
  const target = typeof raw === 'string' ? raw : (request.url ?? '/');
  let url: URL;
  try {
    url = new URL(target, 'http://dashboard.invalid');
  } catch {
    return null;
  }
  const root = mountPath === '/' ? '' : mountPath;
  if (url.pathname === root) return { path: '/', query: url.searchParams, bare: true };
  if (!url.pathname.startsWith(`${root}/`)) return null;
  return { path: url.pathname.slice(root.length), query: url.searchParams, bare: false };
}

/**
 * True when a change request comes from a page of this very site. Browsers mark every request
 * with `Sec-Fetch-Site`, which a page cannot forge; without it the `Origin` header must name the
 * request's own host (or a trusted origin). A request with neither is refused.
 */
export function isSameOrigin(request: IncomingMessage, trustedOrigins: readonly string[]): boolean {
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined) return site === 'same-origin';
  const origin = request.headers.origin;
  if (origin === undefined || origin === 'null') return false;
  if (trustedOrigins.includes(origin)) return true;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

/** True when the connection is TLS (the CSRF cookie is then marked Secure). */
export function isEncrypted(request: IncomingMessage): boolean {
  return (request.socket as { encrypted?: boolean } | undefined)?.encrypted === true;
}

function fromParsedBody(body: object): URLSearchParams {
  const form = new URLSearchParams();
  for (const [key, value] of Object.entries(body)) {
    const values: unknown[] = Array.isArray(value) ? value : [value];
    for (const item of values) {
      if (typeof item !== 'string') throw new DashboardHttpError(400, `The form field ${key} is not text.`);
      form.append(key, item);
    }
  }
  return form;
}

/**
 * The fields of a form post (`application/x-www-form-urlencoded`). A framework may have parsed
 * the body already (Express and Nest do): its `request.body` is used then; otherwise the body is
 * read here, up to 512 KiB.
 */
export async function readForm(request: IncomingMessage): Promise<URLSearchParams> {
  const type = (request.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    throw new DashboardHttpError(415, 'Changes are sent as forms (application/x-www-form-urlencoded).');
  }
  const parsed = (request as IncomingMessage & { body?: unknown }).body;
  if (typeof parsed === 'object' && parsed !== null && !Buffer.isBuffer(parsed)) return fromParsedBody(parsed);
  if (typeof parsed === 'string') return new URLSearchParams(parsed);
  if (request.readableEnded) throw new DashboardHttpError(400, 'The form was read by another part of the server before the dashboard.');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_FORM_BYTES) throw new DashboardHttpError(413, 'The form is too large.');
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}
