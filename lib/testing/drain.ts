import { setTimeout as sleep } from 'node:timers/promises';
import { WorkhorseValidationError } from '../core/errors';
import { WorkhorseWorker } from '../nest/workhorse.worker';
import { messages } from '../nest/workhorse.messages';
import { dueJobs } from './jobs';
import { adminOf, isNestTarget, type WorkhorseTestTarget } from './target';
import { DrainTimeoutError } from './testing.errors';

/** What a drain needs of a worker (the Nest `WorkhorseWorker` or a core `Worker`), and how it runs one pass. */
interface Drainable {
  worker: { readonly isRunning: boolean; readonly queues: readonly string[]; readonly activeCount: number };
  /** One pass; resolves with how many jobs it ran. */
  runOnce(queues: string[] | undefined, signal: AbortSignal): Promise<number>;
}

function drainableOf(target: WorkhorseTestTarget): Drainable {
  if (isNestTarget(target)) {
    const worker = target.get(WorkhorseWorker);
    return { worker, runOnce: (queues, signal) => worker.runOnce({ queues, signal }) };
  }
  const worker = target.worker;
  if (!worker) throw new WorkhorseValidationError('worker', 'drainWorkhorse without Nest needs the core worker whose handlers run the jobs ({ queue, worker })');
  // A core pass claims from the worker's own queues (it takes no others, and no signal).
  return { worker, runOnce: () => worker.runOnce() };
}

/**
 * Options of {@link drainWorkhorse}.
 *
 * @example
 * await drainWorkhorse(app, { timeoutMs: 30_000, queues: ['reports'] });
 */
export interface DrainOptions {
  /** Give up (with a {@link DrainTimeoutError}) after this long. Default 10 000 ms. */
  timeoutMs?: number;
  /** Also drain these queues (besides the worker's queues and those the handlers declare). */
  queues?: string[];
  /** How often to look while a running worker works, default 20 ms. */
  pollMs?: number;
}

/**
 * Runs jobs until none is due any more: nothing ready, nothing running, no scheduled job whose
 * time has come (a retry with a delay still in the future is not due). If the application runs
 * a worker, waits for that worker; otherwise runs the discovered handlers itself with a
 * temporary worker (`WorkhorseWorker.runOnce`) pass after pass. Jobs that the handlers enqueue
 * are run too. Throws a {@link DrainTimeoutError} naming what is still due after `timeoutMs`.
 *
 * Without Nest, give the core objects: `{ queue, worker }` (or `{ pool, worker }`). A running
 * core worker is waited for, as above; an idle one runs `worker.runOnce()` pass after pass on
 * its own queues (`queues` adds none then, and a handler still running at the timeout is not
 * aborted).
 *
 * @example
 * const app = await Test.createTestingModule({ imports: [AppModule] }).compile();
 * await app.init();
 * await app.get(OrderService).placeOrder('o-1');
 * await drainWorkhorse(app);
 * expect(await app.get(Admin).listJobs({ type: 'order.fulfill', states: ['succeeded'] })).toHaveProperty('items.length', 1);
 */
export async function drainWorkhorse(app: WorkhorseTestTarget, options: DrainOptions = {}): Promise<void> {
  const { worker, runOnce } = drainableOf(app);
  const admin = adminOf(app);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const timedOut = async (queues: readonly string[] | null) => {
    const due = await dueJobs(admin, queues);
    return new DrainTimeoutError(messages.drainTimeout(timeoutMs, due), due);
  };

  if (worker.isRunning) {
    const queues = [...worker.queues, ...(options.queues ?? [])];
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (worker.activeCount === 0 && (await dueJobs(admin, queues)).length === 0) return;
      if (Date.now() >= deadline) throw await timedOut(queues);
      await sleep(options.pollMs ?? 20);
    }
  }

  const stop = new AbortController();
  const expired = sleep(timeoutMs, 'expired' as const, { signal: stop.signal }).catch(() => 'finished' as const);
  try {
    for (;;) {
      const pass = runOnce(options.queues, stop.signal);
      const claimed = await Promise.race([pass, expired]);
      if (claimed === 'expired') {
        pass.catch(() => undefined); // a handler that ignores its abort signal may settle much later
        throw await timedOut(null);
      }
      if (claimed === 0) return;
    }
  } finally {
    stop.abort();
  }
}
