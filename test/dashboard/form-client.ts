/**
 * A client of the dashboard over real HTTP that behaves like a browser where the dashboard's
 * safety checks are concerned: it keeps the CSRF cookie, reads the form token from a page and
 * sends the Origin header of the page it came from (unless a test says otherwise).
 */
export interface PostOptions {
  /** The Origin header; default the dashboard's own origin, `null` for none. */
  origin?: string | null;
  /** Extra headers (`sec-fetch-site`, the sample's operator token). */
  headers?: Record<string, string>;
  /** Replace the token the page gave. */
  token?: string;
  /** Send no cookie. */
  noCookie?: boolean;
}

export class FormClient {
  private cookie: string | null = null;
  token: string | null = null;

  /** `base` is the dashboard's URL with its trailing slash: `http://127.0.0.1:1234/workhorse/`. */
  constructor(
    readonly base: string,
    private readonly headers: Record<string, string> = {},
  ) {}

  async get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string; response: Response }> {
    const response = await fetch(new URL(path, this.base), {
      headers: { ...this.headers, ...headers, ...(this.cookie ? { cookie: this.cookie } : {}) },
      redirect: 'manual',
    });
    const setCookie = response.headers.get('set-cookie');
    if (setCookie) this.cookie = setCookie.split(';')[0];
    const text = await response.text();
    const token = /name="csrf" value="([^"]+)"/.exec(text);
    if (token) this.token = token[1];
    return { status: response.status, text, response };
  }

  async post(path: string, fields: Record<string, string | string[]>, options: PostOptions = {}): Promise<{ status: number; text: string; location: string | null; headers: Headers }> {
    const body = new URLSearchParams();
    for (const [key, value] of Object.entries(fields)) for (const item of Array.isArray(value) ? value : [value]) body.append(key, item);
    body.set('csrf', options.token ?? this.token ?? '');
    const origin = options.origin === undefined ? new URL(this.base).origin : options.origin;
    const response = await fetch(new URL(path, this.base), {
      method: 'POST',
      headers: {
        ...this.headers,
        'content-type': 'application/x-www-form-urlencoded',
        ...(origin !== null ? { origin } : {}),
        ...(this.cookie && !options.noCookie ? { cookie: this.cookie } : {}),
        ...options.headers,
      },
      body,
      redirect: 'manual',
    });
    return { status: response.status, text: await response.text(), location: response.headers.get('location'), headers: response.headers };
  }
}

/** Every URL a page points at (`href`, `src`, `action`), as written in the markup. */
export function linksOf(page: string): string[] {
  return [...page.matchAll(/\s(?:href|src|action)="([^"]*)"/g)].map((match) => match[1].replaceAll('&amp;', '&'));
}
