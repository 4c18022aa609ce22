import { ClaimBudget } from './claim-budget';
import type { Execution, ExecutionLane } from './execution';
import { leaseFields } from './heartbeater';

/** A success waiting for its lane's next round trip. */
export interface Completion {
  execution: Execution;
  /** The handler's result as JSON text. */
  resultText: string;
  /** Sent in a round trip of its own: a batch it was in was refused, and the culprit must be found. */
  alone?: boolean;
}

/** What a lane needs of its round trips (see RoundTrips). */
export interface LanePump {
  pump(lane: Lane): Promise<void>;
}

/**
 * One round trip's share of the worker (`roundTrips` of them): its slots, how many of its
 * handlers run, the completions waiting for its next round trip, and the state of its pump
 * (the loop that sends its round trips, one at a time).
 */
export class Lane implements ExecutionLane {
  /** Its handlers running now (started and not yet finished). */
  active = 0;
  /** Completions for the next round trip, in the order the handlers returned. */
  readonly pending: Completion[] = [];
  /** The pump, while it runs. */
  pumping: Promise<void> | null = null;
  /** A pump is about to start (see wake). */
  private scheduled = false;
  /** Something happened while the pump ran: it must look again before it stops. */
  again = false;
  /** The lane's last claim found fewer jobs than it asked for: its queues ran dry. */
  dry = false;
  /** A notification arrived while the lane was dry and a round trip was in flight. */
  private hinted = false;
  /** How often notifications may make the lane claim while it is dry. */
  readonly budget = new ClaimBudget();

  constructor(
    /** The name of the worker group whose slots these are (its jobs' events say `group`). */
    readonly group: string,
    /** How many handlers it may run at once. */
    readonly slots: number,
    private readonly pump: LanePump,
  ) {}

  /** Queues a success for the lane's next round trip. */
  complete(execution: Execution, resultText: string): void {
    this.pending.push({ execution, resultText });
    this.wake();
  }

  /** Asks for a round trip as soon as possible, coalescing everything that happens meanwhile. */
  wake(): void {
    if (this.pumping) {
      this.again = true;
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate lets every handler that finishes in this turn of the event loop join the batch.
    setImmediate(() => {
      this.scheduled = false;
      this.pumping ??= this.pump.pump(this).finally(() => {
        this.pumping = null;
        const hinted = this.hinted;
        this.hinted = false;
        if (this.again) {
          this.again = false;
          this.wake();
        } else if (hinted) {
          this.hint();
        }
      });
    });
  }

  /**
   * A notification: a queue may have gained work. A lane whose last claim found jobs claims at
   * once; a dry lane claims within its ClaimBudget (anyone who can connect can send
   * notifications, so a flood of them must not turn into a flood of empty claims).
   */
  hint(): void {
    // A round trip about to start claims anyway; one in flight may have claimed before the news.
    if (!this.dry) this.wake();
    else if (this.pumping) this.hinted = true;
    else if (!this.scheduled) this.budget.request(() => this.wake());
  }

  /** True while completions wait or a round trip is under way. */
  get busy(): boolean {
    return this.pending.length > 0 || this.pumping !== null || this.scheduled;
  }
}

/**
 * `[{"jobId", "fence", "result"}]` as JSON text, written directly (it runs for every job); the
 * result is JSON text already.
 */
export function completionItems(batch: readonly Completion[]): string {
  let text = '[';
  for (let i = 0; i < batch.length; i++) {
    const { execution, resultText } = batch[i];
    text += `${i === 0 ? '' : ','}{${leaseFields(execution.job)},"result":${resultText}}`;
  }
  return `${text}]`;
}
