import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { DashboardAction } from 'nestjs-workhorse/dashboard';

/** The cookie `GET /operator?token=...` sets, so a browser can act as the operator. */
export const OPERATOR_COOKIE = 'sample_operator';
/** The header a script (or a browser extension) can send instead. */
export const OPERATOR_HEADER = 'x-operator-token';

/** Compares a given token with the operator token in constant time. */
export function sameToken(given: string | undefined, token: string): given is string {
  if (given === undefined) return false;
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(given), digest(token));
}

function cookie(request: IncomingMessage, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return decodeURIComponent(value.join('='));
  }
  return undefined;
}

/** True when the request carries the operator token, in the header or in the cookie. */
export function isOperator(request: IncomingMessage, token: string): boolean {
  const header = request.headers[OPERATOR_HEADER];
  return sameToken(typeof header === 'string' ? header : undefined, token) || sameToken(cookie(request, OPERATOR_COOKIE), token);
}

/**
 * The sample's policy: anyone who reaches the app (it listens on 127.0.0.1 by default) may look
 * at queues, jobs and timelines; job data and every change need the operator token. A real
 * application asks its own session or identity provider here.
 */
export function sampleAuthorize(token: string): (request: IncomingMessage, action: DashboardAction) => boolean {
  return (request, action) => {
    switch (action) {
      case 'read':
        return true;
      case 'read-data':
      case 'cancel-job':
      case 'run-job-now':
      case 'delete-job':
      case 'redrive-job':
      case 'pause-queue':
      case 'resume-queue':
      case 'decide-wait':
      case 'set-queue-limits':
      case 'pause-schedule':
      case 'resume-schedule':
      case 'trigger-schedule':
      case 'drain-worker':
        return isOperator(request, token);
      default: {
        // A new action in a later release fails to compile here until it is decided.
        const unknown: never = action;
        return unknown;
      }
    }
  };
}
