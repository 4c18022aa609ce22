import type { Admin } from '../core/admin';

/**
 * How long one read is served to every live viewer of the process. Pages refreshing by
 * themselves (the `X-Workhorse-Live` requests of dashboard.js) read through {@link sharedReads}:
 * twenty open dashboards then cost one query set per interval, not twenty.
 */
export const LIVE_READ_TTL_MS = 2_000;

/** The Admin methods a live refresh may share: reads only, answered the same to every viewer. */
const SHARED = new Set<string>([
  'getJob', 'getJobTimeline', 'listJobs', 'findJobs', 'jobDurations', 'listCheckpoints', 'queueActivity',
  'listHumanWaits', 'listJobSignals', 'listJobWaits', 'listDeadLetters', 'listQueues', 'listWorkers', 'health',
  'listSchedules', 'getScheduleHistory', 'jobTimings', 'errorGroups',
]);

function isClient(value: unknown): boolean {
  return typeof value === 'object' && value !== null && typeof (value as { query?: unknown }).query === 'function';
}

interface Entry {
  expires: number;
  value: Promise<unknown>;
}

/**
 * An Admin whose reads are memoised for `ttlMs` by method and arguments, for every caller:
 * concurrent refreshes share one query (the promise is kept while it runs). Anything else (a
 * change) is refused, so a live refresh can never write. A failed read is not kept.
 */
export function sharedReads(admin: Admin, ttlMs: number = LIVE_READ_TTL_MS): Admin {
  const cache = new Map<string, Entry>();
  return new Proxy(admin, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof property !== 'string' || typeof value !== 'function') return value;
      if (!SHARED.has(property)) {
        return () => Promise.reject(new Error(`a live refresh of the dashboard may not call ${property}`));
      }
      return (...args: unknown[]) => {
        // A read on a client of its own (in a transaction, under a statement timeout) is not shared.
        if (args.some(isClient)) return (value as (...a: unknown[]) => unknown).apply(target, args);
        const now = Date.now();
        for (const [name, entry] of cache) if (entry.expires <= now) cache.delete(name);
        const key = `${property}:${JSON.stringify(args, (_k, v: unknown) => (v instanceof Map ? [...v] : v))}`;
        const hit = cache.get(key);
        if (hit) return hit.value;
        const result = Promise.resolve((value as (...a: unknown[]) => unknown).apply(target, args));
        cache.set(key, { expires: now + ttlMs, value: result });
        result.catch(() => cache.delete(key));
        return result;
      };
    },
  });
}
