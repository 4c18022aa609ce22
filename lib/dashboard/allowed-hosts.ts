import type { IncomingMessage } from 'node:http';

/**
 * The host names the dashboard answers on, against DNS rebinding: a page of another site whose
 * name is made to resolve to the dashboard's address reaches it with its own name in `Host`
 * (the browser never lets a page set that header), so a request for a name the dashboard does
 * not serve is refused before any data is read.
 *
 * Loopback (`localhost`, `127.x.x.x`, `[::1]`) is always served: a browser sends those names
 * only to its own machine, so they cannot be rebound. Other names are the `allowedHosts` option
 * (`ops.example.com`, or `.example.com` for a domain and its subdomains); without it, the first
 * host an authorized reader reached the dashboard on is kept for the life of the process.
 */
export type HostVerdict =
  /** The name is served. */
  | 'allowed'
  /** Not served: another name, or no (or a malformed) `Host`. */
  | 'refused'
  /** Nothing is kept yet: the name is served once `authorize` allows this request to read (then call {@link AllowedHosts.keep}). */
  | 'first';

// A Host header: a DNS name or an IPv4 address, or a bracketed IPv6 address, with an optional port.
const HOST_HEADER = /^(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*\.?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;
// An entry of allowedHosts: a name (a leading dot for its subdomains too), or a bracketed IPv6 address.
const ALLOWED_ENTRY = /^(?:\.?[a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])$/i;
const LOOPBACK = /^(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])$/;

/** The host name of a request (lower case, no port, no trailing dot), or null without a well-formed `Host`. */
export function hostNameOf(request: IncomingMessage): string | null {
  // HTTP/2 names the host in its :authority pseudo-header (Node's compatibility API keeps it there).
  const header = request.headers.host ?? request.headers[':authority'];
  if (typeof header !== 'string' || !HOST_HEADER.test(header)) return null;
  const name = header.toLowerCase().replace(/:\d+$/, '');
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

/** True for an entry `allowedHosts` accepts: `ops.example.com`, `.example.com`, `10.0.0.5`, `[fd00::1]` (no scheme, no port). */
export function isAllowedHostEntry(entry: unknown): entry is string {
  return typeof entry === 'string' && entry.length <= 253 && ALLOWED_ENTRY.test(entry);
}

export class AllowedHosts {
  private readonly names: readonly string[] | null;
  private kept: string | null = null;

  /** `configured` is the `allowedHosts` option, checked; undefined keeps the first host reached. */
  constructor(configured: readonly string[] | undefined) {
    this.names = configured?.map((entry) => entry.toLowerCase()) ?? null;
  }

  verdict(name: string | null): HostVerdict {
    if (name === null) return 'refused';
    if (this.names !== null) {
      const listed = this.names.some((entry) => (entry.startsWith('.') ? name === entry.slice(1) || name.endsWith(entry) : name === entry));
      return listed || LOOPBACK.test(name) ? 'allowed' : 'refused';
    }
    // Loopback reached first is kept too: a dashboard used on localhost then serves no other name.
    if (this.kept === null) return 'first';
    return this.kept === name || LOOPBACK.test(name) ? 'allowed' : 'refused';
  }

  /**
   * Keeps `name` as the host of the dashboard, if no other was kept meanwhile (two first
   * requests may be authorized at once). True when `name` is the one kept.
   */
  keep(name: string): boolean {
    this.kept ??= name;
    return this.kept === name;
  }
}
