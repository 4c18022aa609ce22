import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** The cookie that binds a browser to its form tokens. */
export const CSRF_COOKIE = 'workhorse_dashboard_csrf';
/** The form field that carries the token. */
export const CSRF_FIELD = 'csrf';

const NONCE = /^[A-Za-z0-9_-]{24,64}$/;

/**
 * Form tokens as signed double-submit cookies: the browser holds a random nonce in an HttpOnly,
 * SameSite=Strict cookie, and each form carries an HMAC of that nonce under the dashboard's
 * secret. A forged form from another site can neither read the nonce nor compute its HMAC, and
 * a cookie planted by a sibling subdomain is useless without the secret. No server-side session
 * is needed, so any instance that shares the secret accepts the form.
 */
export class CsrfTokens {
  constructor(private readonly secret: string) {}

  /** The browser's nonce, or null when it has none (or a malformed one). */
  nonceOf(request: IncomingMessage): string | null {
    const header = request.headers.cookie;
    if (header === undefined) return null;
    for (const part of header.split(';')) {
      const [name, ...value] = part.trim().split('=');
      if (name === CSRF_COOKIE) {
        const nonce = value.join('=');
        return NONCE.test(nonce) ? nonce : null;
      }
    }
    return null;
  }

  newNonce(): string {
    return randomBytes(24).toString('base64url');
  }

  /** The `Set-Cookie` value that gives the browser its nonce (for the whole site, as proxies may add path prefixes). */
  cookie(nonce: string, secure: boolean): string {
    return `${CSRF_COOKIE}=${nonce}; Path=/; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
  }

  tokenFor(nonce: string): string {
    return createHmac('sha256', this.secret).update(`workhorse-dashboard:${nonce}`).digest('base64url');
  }

  /** True when the form's token is the one the browser's nonce gives. */
  verify(nonce: string | null, token: string | undefined): boolean {
    if (nonce === null || token === undefined) return false;
    const expected = Buffer.from(this.tokenFor(nonce));
    const given = Buffer.from(token);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}
