import { WorkhorseError } from '../errors';
import { fromPgError } from '../protocol/errors';
import { isLost } from './execution';
import { failpoint } from '../failpoints';
import type { EventHub } from './event-hub';
import type { Executor } from './executor';
import { completionItems, Lane } from './lane';
import { MAX_ROUND, type OwnerStatements, type RoundTripRow } from '../protocol/owner-statements';
import type { OutcomeRecorder } from './outcome-recorder';
import type { WorkerGroupSettings, WorkerSettings } from './worker-options';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The hot path: each round trip records the completions that gathered since the last one AND
 * claims as many jobs as slots will then be free, in one statement and one commit
 * (`complete_and_claim_v1`). Commits are what a durable queue pays for; sharing one between a
 * batch of completions and the next claim halves them. Completions that arrive while a round
 * trip is in flight simply go in the next one, and a slot freed by a failure or release wakes
 * the lane too. Each lane (`roundTrips`, default 1) owns a share of the slots, and its pump
 * records the completions of its own jobs and claims for its own free slots only, so lanes
 * never wait for one another. Polling (with an idle backoff) stands in for notifications that
 * do not come.
 *
 * A worker has one RoundTrips per group (`groups`): each claims from its group's queues for its
 * group's slots only, and polls on its own, so a flood in one group never takes another's slots.
 */
export class RoundTrips {
  readonly lanes: readonly Lane[];
  private readonly recorder: OutcomeRecorder;
  private idleRounds = 0;
  private pollTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly settings: WorkerSettings,
    readonly group: WorkerGroupSettings,
    private readonly statements: OwnerStatements,
    private readonly executor: Executor,
    private readonly hub: EventHub,
    /** The worker may claim now (running, not paused, not stopping). */
    private readonly isClaiming: () => boolean,
  ) {
    this.recorder = executor.recorder;
    const { concurrency, roundTrips } = group;
    this.lanes = Array.from(
      { length: roundTrips },
      (_, i) => new Lane(group.name, Math.floor(concurrency / roundTrips) + (i < concurrency % roundTrips ? 1 : 0), this),
    );
  }

  /** Asks every lane for a round trip (work may have arrived, or claiming may go on). */
  wake(): void {
    for (const lane of this.lanes) lane.wake();
  }

  /** A notification (a hint that work may have arrived): see Lane.hint. */
  hint(): void {
    for (const lane of this.lanes) lane.hint();
  }

  /** Stops polling and drops claims waiting for a notification's budget (the worker stops claiming). */
  stopPolling(): void {
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = null;
    for (const lane of this.lanes) lane.budget.cancel();
  }

  /** Waits until every queued completion is recorded (or given up). */
  async flush(): Promise<void> {
    for (let lane = this.lanes.find((l) => l.busy); lane !== undefined; lane = this.lanes.find((l) => l.busy)) {
      if (lane.pumping) await lane.pumping;
      else await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** For `runOnce`: one claim of up to `limit` jobs, started at once in the first lane. */
  async claimOnce(limit: number): Promise<number> {
    const sentAt = Date.now();
    const rows = await this.statements.roundTrip('[]', Math.min(limit, MAX_ROUND), this.group.queues);
    const claimedAt = Date.now();
    for (const row of rows) this.executor.start(row, this.lanes[0], sentAt, claimedAt);
    return rows.length;
  }

  /** A lane's round trips, one after another, until nothing is left to record or claim. */
  async pump(lane: Lane): Promise<void> {
    let failures = 0;
    for (;;) {
      lane.again = false;
      const batch = lane.pending.splice(0, lane.pending[0]?.alone ? 1 : MAX_ROUND);
      // Slots held by the executions in this batch are free once the batch is recorded.
      const want = this.isClaiming() ? Math.min(MAX_ROUND, lane.slots - lane.active + batch.length) : 0;
      if (batch.length === 0 && want <= 0) return;
      if (want > 0) this.stopPolling();
      const sentAt = Date.now();
      let rows: RoundTripRow[];
      try {
        if (batch.length > 0) failpoint('before-complete');
        rows = await this.statements.roundTrip(completionItems(batch), Math.max(want, 0), this.group.queues);
        if (batch.length > 0) failpoint('after-complete');
      } catch (error) {
        const typed = fromPgError(error);
        if (typed instanceof WorkhorseError) {
          if (batch.length === 1) {
            this.recorder.refused(batch[0].execution, typed);
          } else {
            // One refused result (e.g. over the size limit) fails the whole statement: send each
            // completion of the batch on its own so only the culprit is refused.
            for (const c of batch) c.alone = true;
            lane.pending.unshift(...batch);
          }
          continue;
        }
        // The database could not be reached, or the commit's fate is unknown. Completions are
        // tried again while we still hold their leases (heartbeats keep them alive meanwhile):
        // one that did commit is recognised by its fence and answers `succeeded` again, never a
        // second outcome. Jobs a lost claim may have taken are recovered when their leases expire.
        this.hub.reportError(batch.length > 0 ? 'complete' : 'claim', error as Error);
        failures++;
        const owned = batch.filter((c) => !isLost(c.execution));
        for (const c of batch) if (!owned.includes(c)) this.recorder.completed(c.execution, 'stale');
        lane.pending.unshift(...owned);
        if (owned.length === 0 && !this.isClaiming()) return;
        if (owned.length === 0) {
          this.idleRounds++;
          this.schedulePoll();
          return;
        }
        await delay(Math.min(2000, 50 * 2 ** failures) * (0.5 + Math.random() / 2));
        continue;
      }
      failures = 0;
      // (Nothing to do unless they had failed: a check of an empty map.)
      this.hub.reportSuccess('claim');
      this.hub.reportSuccess('complete');
      // The completions that did not succeed come first, by job id; the claimed jobs follow.
      let first = 0;
      let unsucceeded: Map<string, string> | null = null;
      for (; first < rows.length && rows[first][1] !== 'claimed'; first++) (unsucceeded ??= new Map()).set(rows[first][0], rows[first][1]);
      for (const c of batch) this.recorder.completed(c.execution, unsucceeded?.get(c.execution.job.jobId) ?? 'succeeded');
      const claimed = first === 0 ? rows : rows.slice(first);
      const claimedAt = Date.now();
      if (claimed.length > 0) {
        failpoint('after-claim');
        lane.budget.refund();
      }
      for (const row of claimed) this.executor.start(row, lane, sentAt, claimedAt);
      if (want > 0) {
        lane.dry = claimed.length < want;
        if (lane.dry) {
          // The queues ran dry: wait for a notification or the next poll.
          this.idleRounds++;
          this.schedulePoll();
          if (lane.pending.length === 0) return;
        } else {
          this.idleRounds = 0;
        }
      }
    }
  }

  // Idle backoff: each empty claim stretches the next poll, up to five times pollMs.
  private schedulePoll(): void {
    if (this.pollTimer || !this.isClaiming()) return;
    const base = this.settings.pollMs * Math.min(5, 1 + this.idleRounds / 4);
    this.pollTimer = setTimeout(() => {
      this.pollTimer = null;
      this.wake();
    }, base * (0.8 + Math.random() * 0.4));
  }
}
