/** What a probe of `waitFor` gives back: a value once the condition holds, nothing before. */
export type Probe<T> = () => Promise<T | null | undefined | false> | T | null | undefined | false;

export interface WaitOptions {
  /**
   * Treat a probe that throws as "not yet" and try again (default false: the error fails the
   * wait at once). For probes that query a server while it restarts; the last error is named
   * in the timeout's message.
   */
  retryErrors?: boolean;
}

/**
 * Polls `probe` every 20 ms until it gives a value, and resolves with that value; fails after
 * `timeoutMs` with an error naming `what` it waited for. A value is anything but `undefined`,
 * `null` or `false` (so `0` and `''` count), which lets a probe say "not yet" with a condition
 * (`rows.length === 1 && rows`). Tests wait for conditions this way, never with a fixed sleep.
 *
 * Every test waits through this one function, with this argument order:
 *
 *     const job = await waitFor(() => admin.getJob(id), 5_000, 'the job to be committed');
 */
export async function waitFor<T>(probe: Probe<T>, timeoutMs: number, what: string, options: WaitOptions = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value;
    } catch (error) {
      if (!options.retryErrors) throw error;
      lastError = error;
    }
    if (Date.now() > deadline) {
      const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}`);
    }
    await delay(20);
  }
}

/**
 * Resolves after `ms`. Not a way to wait for a condition (that is `waitFor`): for a handler that
 * must take some time, or a pause a test measures around.
 */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A latch a test opens by hand, e.g. to hold a handler inside its work until the test is ready. */
export interface Gate {
  promise: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
