/**
 * How often a notification may make a worker lane claim while its queues are dry: a token bucket
 * of `burst` claims, refilled at `perSecond`. Any role that can connect may `NOTIFY` the
 * workers' channel (PostgreSQL has no privilege for it), so a notification is a hint, not work:
 * a flood of them must cost a few claims per second, not one claim per notification. Only empty
 * claims cost: a claim that finds jobs gives its token back. Claims for work the worker knows
 * about (completions to record, slots a finished job freed, polls) never wait for the budget, and
 * neither does a notification while the last claim found all the jobs it asked for.
 *
 * @example
 * const budget = new ClaimBudget();
 * notifier.onNotification(() => budget.request(() => lane.claim()));
 */
export class ClaimBudget {
  private tokens: number;
  private at = Date.now();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly burst = 5,
    private readonly perSecond = 5,
  ) {
    this.tokens = burst;
  }

  /**
   * Calls `claim` now if a token is left, or once one is (at most one call waits; requests made
   * meanwhile join it).
   */
  request(claim: () => void): void {
    if (this.timer) return;
    const now = Date.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.perSecond) / 1000);
    this.at = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      claim();
      return;
    }
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.request(claim);
      },
      Math.ceil(((1 - this.tokens) * 1000) / this.perSecond),
    );
  }

  /** A claim found jobs: notifications are news, so the claim is given back. */
  refund(): void {
    this.tokens = Math.min(this.burst, this.tokens + 1);
  }

  /** Drops a waiting call (the worker is stopping). */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
