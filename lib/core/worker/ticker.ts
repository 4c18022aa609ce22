import type { Pool } from 'pg';
import type { EventHub } from './event-hub';

/**
 * Offers maintenance (`tick_v1`: promotion of due jobs, recovery of expired leases, partition
 * preparation) about once per `tickMs`, jittered. The database runs one tick at a time under a
 * try-advisory lock, so a worker whose offer finds the lock taken is answered at once.
 */
export class Ticker {
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  private ticking = false;

  constructor(
    private readonly pool: Pool,
    private readonly tickMs: number,
    private readonly hub: EventHub,
  ) {}

  /** Ticks now, then about every `tickMs` until {@link stop}. */
  start(): void {
    this.ticking = true;
    this.schedule(0);
  }

  /** Stops ticking and waits for a tick under way. */
  async stop(): Promise<void> {
    this.ticking = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.inFlight;
  }

  /** One tick; a failure is reported, never thrown. */
  async tick(): Promise<void> {
    try {
      await this.pool.query('SELECT workhorse.tick_v1()');
      this.hub.reportSuccess('tick');
    } catch (error) {
      this.hub.reportError('tick', error as Error);
    }
  }

  private schedule(delay: number): void {
    if (!this.ticking) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.inFlight = this.tick().finally(() => {
        this.inFlight = null;
        this.schedule(this.tickMs * (0.8 + Math.random() * 0.4));
      });
    }, delay);
    this.timer.unref();
  }
}
