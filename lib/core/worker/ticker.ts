import type { Pool } from 'pg';
import { registerHandlerPolicies, type HandlerPolicy } from '../handler-policies';
import type { EventHub } from './event-hub';
import { runTick } from './tick';

/**
 * Offers maintenance (`tick_v1`: promotion of due jobs, recovery of expired leases, due schedule
 * occurrences, partition preparation; see {@link runTick}) about once per `tickMs`, jittered.
 * The database runs one tick at a time under a try-lock (a row only its functions can lock), so
 * a worker whose offer finds the lock taken is answered at once. When a tick leaves work (a
 * backlog of due jobs), the next one follows at once. Before its first tick the ticker registers
 * the handlers' retry policies, until that succeeds.
 */
export class Ticker {
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  private ticking = false;
  /** The handlers' retry policies are registered with the server. */
  private registered = false;

  constructor(
    private readonly pool: Pool,
    private readonly tickMs: number,
    private readonly hub: EventHub,
    private readonly workerId: string,
    private readonly queues: readonly string[],
    private readonly policies: () => Iterable<HandlerPolicy>,
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

  /** One tick; true when it left work. A failure is reported, never thrown. */
  async tick(): Promise<boolean> {
    try {
      if (!this.registered) {
        await registerHandlerPolicies(this.pool, this.workerId, this.queues, this.policies());
        this.registered = true;
      }
      const result = await runTick(this.pool);
      this.hub.reportSuccess('tick');
      return result.more === true;
    } catch (error) {
      this.hub.reportError('tick', error as Error);
      return false;
    }
  }

  private schedule(delay: number): void {
    if (!this.ticking) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.inFlight = this.tick().then((more) => {
        this.inFlight = null;
        this.schedule(more ? 0 : this.tickMs * (0.8 + Math.random() * 0.4));
      });
    }, delay);
    this.timer.unref();
  }
}
