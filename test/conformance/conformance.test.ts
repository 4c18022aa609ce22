/**
 * The shared conformance scenarios (sdk/conformance/scenarios) through the TypeScript core
 * clients, each in a fresh database: the same cases the Python and Go SDKs run, so every SDK is
 * held to one behaviour.
 */
import { isDeepStrictEqual } from 'node:util';
import {
  Admin,
  DecisionNotAllowedError,
  IdempotencyConflictError,
  JobFailedError,
  JobNotFoundError,
  JobResultCanceledError,
  JobActionRefusedError,
  UnknownDependencyError,
  Queue,
  WaitForResultTimeoutError,
  Worker,
  WorkhorseValidationError,
  type DedupeOptions,
  type EnqueueOptions,
  type EnqueueRequest,
  type JobLineage,
  type JobSnapshot,
  type JsonValue,
  type Page,
  type TimelineEntry,
  type WorkerOptions,
} from '../../lib/core';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { expectSplitInvariant } from '../support/invariants';
import { waitFor } from '../support/wait';
import { loadScenarios, scriptHandler, type Action, type Scenario } from './scenario';

const SCENARIOS = loadScenarios();

/**
 * `{"inMs": n}` is now plus n ms (runAt, deadline); a `dependsOn` entry that names a scenario
 * job is that job's id; every other value is used as written.
 */
function options(wire: Record<string, unknown> = {}, jobs: ReadonlyMap<string, string> = new Map()): EnqueueOptions {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(wire)) {
    const inMs = (value as { inMs?: number } | null)?.inMs;
    if (key === 'dependsOn' && Array.isArray(value)) out[key] = value.map((entry: unknown) => (typeof entry === 'string' ? (jobs.get(entry) ?? entry) : entry));
    else out[key] = typeof inMs === 'number' ? new Date(Date.now() + inMs) : value;
  }
  return out as EnqueueOptions;
}

/** A kind of `expectError` and the typed error it stands for. */
const ERROR_KINDS: Record<string, new (...args: never[]) => Error> = {
  validation: WorkhorseValidationError,
  idempotency_conflict: IdempotencyConflictError,
  unknown_dependency: UnknownDependencyError,
  decision_not_allowed: DecisionNotAllowedError,
  action_refused: JobActionRefusedError,
};

class Run {
  readonly jobs = new Map<string, string>();
  readonly workers = new Map<string, { worker: Worker; running: Promise<void> }>();
  readonly effects = new Map<string, number>();
  readonly marks = new Set<string>();
  readonly queue: Queue;
  readonly admin: Admin;

  constructor(
    readonly scenario: Scenario,
    readonly db: TestDatabase,
  ) {
    this.queue = new Queue(db.pool);
    this.admin = new Admin(db.pool);
  }

  private id(name: unknown): string {
    const id = this.jobs.get(name as string);
    if (!id) throw new Error(`no job named ${String(name)}`);
    return id;
  }

  private report = (event: 'effect' | 'mark', jobId: string, name: string) => {
    const key = `${jobId}/${name}`;
    if (event === 'mark') this.marks.add(key);
    else this.effects.set(key, (this.effects.get(key) ?? 0) + 1);
  };

  // Another save of the same name, made as the job's current owner while the handler's own
  // operation runs: the handler's save then finds the name taken (`exists`).
  private saveMeanwhile = async (jobId: string, name: string, value: JsonValue): Promise<void> => {
    const { rows } = await this.db.pool.query<{ status: string }>(
      'SELECT c.status FROM workhorse.job_runtime r, workhorse.save_checkpoint_v2(r.job_id, r.worker_id, r.fence_token, $2, $3::jsonb) c WHERE r.job_id = $1',
      [jobId, name, JSON.stringify(value)],
    );
    if (rows[0]?.status !== 'saved') throw new Error(`the other save of ${name} answered ${rows[0]?.status ?? 'nothing'}`);
  };

  private startWorker(name: string): void {
    // An in-process worker is "killed" by a stop that gives up on its handlers at once: nothing is
    // recorded for their jobs and their leases expire, as after a SIGKILL.
    const killed = this.scenario.actions.some((a) => a.do === 'kill_worker' && a.worker === name);
    const worker = new Worker(this.queue, {
      concurrency: 4,
      pollMs: 100,
      tickMs: 100,
      ...this.scenario.worker,
      shutdownTimeoutMs: killed ? 0 : 25_000,
    });
    for (const [type, steps] of Object.entries(this.scenario.handlers)) worker.handle(type, scriptHandler(steps, this.report, this.saveMeanwhile));
    this.workers.set(name, { worker, running: worker.run() });
  }

  async stopAll(): Promise<void> {
    for (const name of [...this.workers.keys()]) await this.stopWorker(name);
  }

  private async stopWorker(name: string): Promise<void> {
    const entry = this.workers.get(name);
    if (!entry) throw new Error(`no worker named ${name}`);
    this.workers.delete(name);
    await entry.worker.stop();
    await entry.running;
  }

  private async timeline(jobId: string): Promise<TimelineEntry[]> {
    const entries: TimelineEntry[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await this.admin.getJobTimeline(jobId, { limit: 5, cursor });
      entries.push(...page.items);
      if (page.nextCursor === null) return entries;
      cursor = page.nextCursor;
    }
  }

  /** One page of a listing of `expect_pages` (README), filtered by `queue` or `job`. */
  private page(a: Record<string, unknown>, limit: number, cursor: string | undefined): Promise<Page<unknown>> {
    switch (a.listing) {
      case 'jobs':
        return this.admin.listJobs({ queue: a.queue as string | undefined, limit, cursor });
      case 'dead_letters':
        return this.admin.listDeadLetters({ queue: a.queue as string | undefined, limit, cursor });
      case 'timeline':
        return this.admin.getJobTimeline(this.id(a.job), { limit, cursor });
      case 'human_waits':
        return this.admin.listHumanWaits({ ...(a.job === undefined ? { queue: a.queue as string } : { jobId: this.id(a.job) }), limit, cursor });
      default:
        throw new Error(`unknown listing ${String(a.listing)}`);
    }
  }

  /** An operator or producer call of scenario 026 on (README, `operator_call`), with wire-named arguments. */
  private async operatorCall(call: string, args: Record<string, never>): Promise<unknown> {
    const who = { actor: args.actor, reason: args.reason };
    switch (call) {
      case 'pause_queue':
        return this.admin.pauseQueue(args.queue, who);
      case 'drain_worker':
        return this.admin.drainWorker(args.workerId, who);
      case 'list_jobs':
        return this.admin.listJobs({ queue: args.queue, type: args.type });
      case 'list_dead_letters':
        return this.admin.listDeadLetters({ queue: args.queue, type: args.type, errorName: args.errorName });
      case 'list_human_waits':
        return this.admin.listHumanWaits({ queue: args.queue, type: args.type, name: args.name });
      case 'sync_schedules':
        return this.queue.syncSchedules(args.namespace, args.definitions);
      default:
        throw new Error(`unknown operator call ${call}`);
    }
  }

  /** A wait_for_result action: the answer, or the typed error `expect` names. */
  private async waitForResult(jobId: string, timeoutMs: number, expected: Record<string, unknown>): Promise<void> {
    let got: unknown;
    try {
      got = await this.queue.waitForResult(jobId, { timeoutMs });
    } catch (error) {
      if (error instanceof JobFailedError && expected.failed) return expect(error.jobError).toMatchObject(expected.failed as object);
      if (error instanceof JobResultCanceledError && expected.canceled) return expect(error.jobError).toMatchObject(expected.canceled as object);
      if (error instanceof WaitForResultTimeoutError && expected.timeout === true) return;
      if (error instanceof JobNotFoundError && expected.notFound === true) return;
      throw error;
    }
    if (!('result' in expected)) throw new Error(`the wait answered ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`);
    expect(isDeepStrictEqual(got, expected.result)).toBe(true);
  }

  private expectError(error: unknown, expected: Record<string, unknown>): void {
    const conflict = expected.kind === 'idempotency_conflict';
    const kind = ERROR_KINDS[expected.kind as string];
    expect(error).toBeInstanceOf(kind);
    // `validation` is none of the more specific kinds (which are validation errors too).
    for (const other of Object.values(ERROR_KINDS)) if (other !== kind && other !== WorkhorseValidationError) expect(error).not.toBeInstanceOf(other);
    if (expected.kind === 'action_refused') {
      // An operator action refused for the job's state names the state, not a field.
      expect((error as JobActionRefusedError).state).toBe(expected.state);
      return;
    }
    expect((error as WorkhorseValidationError).field).toBe(expected.field);
    if (conflict) {
      const e = error as IdempotencyConflictError;
      if (expected.fields) expect(e.fields).toEqual(expected.fields);
      if (expected.existingJob) expect(e.existingJobId).toBe(this.id(expected.existingJob));
    }
  }

  private expectJob(job: JobSnapshot & JobLineage, expected: Action): void {
    for (const [key, want] of Object.entries(expected)) {
      if (key === 'do' || key === 'job') continue;
      if (key === 'error') {
        if (want === null) expect(job.error).toBeNull();
        else {
          const w = want as { name?: string; message?: string; stack?: boolean };
          expect(job.error).not.toBeNull();
          if (w.name !== undefined) expect(job.error?.name).toBe(w.name);
          if (w.message !== undefined) expect(job.error?.message).toBe(w.message);
          if (w.stack) expect(job.error?.stack).toEqual(expect.stringMatching(/\S/));
        }
      } else if (key === 'hasDeadline') {
        expect(job.deadline !== null).toBe(want);
      } else if (key === 'redrivenFrom') {
        expect(job.redrivenFrom).toBe(this.id(want));
      } else if (key === 'dependencies' || key === 'children') {
        const named = (want as { job: string; state: string; key?: string }[]).map(({ job: name, ...rest }) => ({ id: this.id(name), ...rest }));
        expect(job[key]).toEqual(named);
      } else if (key === 'waitingOn') {
        expect(job.waitingOn.map((link) => link.id)).toEqual((want as string[]).map((name) => this.id(name)));
      } else if (key === 'parent') {
        expect(job.parentId).toBe(want === null ? null : this.id(want));
      } else {
        const got = (job as unknown as Record<string, unknown>)[key];
        if (!isDeepStrictEqual(got, want)) throw new Error(`${key}: ${JSON.stringify(got)} != ${JSON.stringify(want)}`);
      }
    }
  }

  /** `enqueue` with `outcome`: through enqueueDeduped, whose outcome must be the one given. */
  private async enqueueDeduped(type: string, payload: unknown, given: EnqueueOptions, outcome: string): Promise<string> {
    const result = await this.queue.enqueueDeduped(type, payload, given as EnqueueOptions & { dedupe: DedupeOptions });
    expect(result.outcome).toBe(outcome);
    return result.jobId;
  }

  async act(action: Action): Promise<void> {
    const a = action as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    switch (action.do) {
      case 'enqueue':
      case 'enqueue_many': {
        let ids: string[];
        try {
          ids =
            action.do === 'enqueue' && a.outcome !== undefined
              ? [await this.enqueueDeduped(a.type, a.payload, options(a.options, this.jobs), a.outcome)]
              : action.do === 'enqueue'
              ? [await this.queue.enqueue(a.type, a.payload, options(a.options, this.jobs))]
              : await this.queue.enqueueMany((a.requests as Record<string, unknown>[]).map((r) => options(r, this.jobs) as EnqueueRequest));
        } catch (error) {
          if (!a.expectError) throw error;
          this.expectError(error, a.expectError);
          return;
        }
        if (a.expectError) throw new Error(`expected ${JSON.stringify(a.expectError)}, got ids ${ids.join(', ')}`);
        if (a.sameAs) expect(ids[0]).toBe(this.id(a.sameAs));
        const names: string[] = action.do === 'enqueue' ? (a.job ? [a.job] : []) : (a.jobs ?? []);
        names.forEach((name, i) => this.jobs.set(name, ids[i]));
        return;
      }
      case 'start_worker':
        return this.startWorker(a.worker);
      case 'kill_worker':
      case 'stop_worker':
        return this.stopWorker(a.worker);
      case 'save_as_lost_owner': {
        // The dead worker's identity stays on the job until recovery (no worker runs to recover it).
        const id = this.id(a.job);
        const expired = async () =>
          (await this.db.pool.query('SELECT 1 FROM workhorse.job_runtime WHERE job_id = $1 AND lease_expires_at <= clock_timestamp()', [id])).rowCount === 1;
        await waitFor(expired, 20_000, 'the lease to run out');
        const { rows } = await this.db.pool.query<{ status: string }>(
          'SELECT c.status FROM workhorse.job_runtime r, workhorse.save_checkpoint_v2(r.job_id, r.worker_id, r.fence_token, $2, $3::jsonb) c WHERE r.job_id = $1',
          [id, a.name, JSON.stringify(a.value)],
        );
        expect(rows[0]?.status).toBe(a.expect);
        return;
      }
      case 'await_mark':
        await waitFor(() => this.marks.has(`${this.id(a.job)}/${a.name}`), a.timeoutMs ?? 20_000, `mark ${a.name}`);
        return;
      case 'await_state': {
        const states: string[] = Array.isArray(a.state) ? a.state : [a.state];
        const id = this.id(a.job);
        await waitFor(async () => states.includes((await this.admin.getJob(id))?.state ?? ''), a.timeoutMs ?? 20_000, `state ${states}`);
        return;
      }
      case 'cancel':
        expect(await this.admin.cancel(this.id(a.job))).toBe(a.expect);
        return;
      case 'set_queue_policy': {
        let info: Awaited<ReturnType<Admin['setQueuePolicy']>>;
        try {
          info = await this.admin.setQueuePolicy(a.queue, a.policy);
        } catch (error) {
          if (!a.expectError) throw error;
          this.expectError(error, a.expectError);
          return;
        }
        if (a.expectError) throw new Error(`expected ${JSON.stringify(a.expectError)}, the policy was set`);
        for (const [key, want] of Object.entries((a.expect ?? {}) as Record<string, unknown>)) {
          expect((info as unknown as Record<string, unknown>)[key]).toEqual(want);
        }
        return;
      }
      case 'redrive':
        this.jobs.set(a.as, await this.admin.redrive(this.id(a.job), { requestId: a.requestId }));
        return;
      case 'wait_for_result':
        return this.waitForResult(a.job === undefined ? (a.jobId as string) : this.id(a.job), a.timeoutMs ?? 20_000, a.expect);
      case 'expect_job': {
        const job = await this.admin.getJob(this.id(a.job));
        if (!job) throw new Error(`job ${a.job} does not exist`);
        return this.expectJob(job, action);
      }
      case 'expect_timeline':
        expect((await this.timeline(this.id(a.job))).map((e) => `${e.source}:${e.kind}`)).toEqual(a.entries);
        return;
      case 'expect_effects': {
        const prefix = `${this.id(a.job)}/`;
        const got = Object.fromEntries([...this.effects].filter(([k]) => k.startsWith(prefix)).map(([k, n]) => [k.slice(prefix.length), n]));
        expect(got).toEqual(a.counts);
        return;
      }
      case 'expect_dead_letter': {
        const page = await this.admin.listDeadLetters({ limit: 1000 });
        expect(page.items.some((j) => j.id === this.id(a.job))).toBe(a.present);
        return;
      }
      case 'send_signal': {
        const jobId = a.jobId ?? this.id(a.job);
        const key = a.idempotencyKey === undefined ? undefined : { idempotencyKey: a.idempotencyKey };
        expect(await this.queue.sendSignal(jobId, a.name, a.payload, key)).toBe(a.expect);
        return;
      }
      case 'complete_human_wait': {
        const decided = { actor: a.actor, ...(a.reason === undefined ? {} : { reason: a.reason }), ...(a.idempotencyKey === undefined ? {} : { idempotencyKey: a.idempotencyKey }) };
        let status: string;
        try {
          status = await this.queue.completeHumanWait(this.id(a.job), a.name, a.decision, decided);
        } catch (error) {
          if (!a.expectError) throw error;
          this.expectError(error, a.expectError);
          return;
        }
        if (a.expectError) throw new Error(`expected ${JSON.stringify(a.expectError)}, got ${status}`);
        expect(status).toBe(a.expect);
        return;
      }
      case 'expect_human_waits': {
        const waits: { name: string; context: unknown; choices: unknown }[] = [];
        let cursor: string | undefined;
        do {
          const page = await this.admin.listHumanWaits({ jobId: this.id(a.job), limit: 1, cursor });
          waits.push(...page.items.map(({ name, context, choices }) => ({ name, context, choices })));
          cursor = page.nextCursor ?? undefined;
        } while (cursor !== undefined);
        expect(waits).toEqual(a.waits);
        return;
      }
      case 'name_children': {
        const ids: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await this.admin.listJobs({ parentId: this.id(a.job), limit: 2, cursor });
          ids.push(...page.items.map((job) => job.id));
          cursor = page.nextCursor ?? undefined;
        } while (cursor !== undefined);
        expect(ids).toHaveLength(a.as.length);
        (a.as as string[]).forEach((name, i) => this.jobs.set(name, ids[i]));
        return;
      }
      case 'expect_pages': {
        const sizes: number[] = [];
        let cursor: string | undefined;
        do {
          const page = await this.page(a, a.limit as number, cursor);
          sizes.push(page.items.length);
          cursor = page.nextCursor ?? undefined;
        } while (cursor !== undefined && sizes.length < 100);
        expect(sizes).toEqual(a.sizes);
        for (const refused of (a.refuses ?? []) as (string | { cursorOf: Action })[]) {
          const foreign = typeof refused === 'string' ? refused : (await this.page(refused.cursorOf, 1, undefined)).nextCursor;
          expect(typeof foreign).toBe('string');
          const error = await this.page(a, a.limit as number, foreign as string).then(() => null, (e: unknown) => e);
          this.expectError(error, { kind: 'validation', field: 'cursor' });
        }
        return;
      }
      case 'check_worker_options': {
        // Building a worker checks its options; it is never started.
        let error: unknown = null;
        try {
          new Worker(this.queue, a.options as WorkerOptions);
        } catch (thrown) {
          error = thrown;
        }
        if (!a.expectError) {
          expect(error).toBeNull();
          return;
        }
        if (error === null) throw new Error(`expected ${JSON.stringify(a.expectError)}, the worker was built`);
        this.expectError(error, a.expectError);
        return;
      }
      case 'job_action': {
        const id = this.id(a.job);
        const who = { ...(a.actor === undefined ? {} : { actor: a.actor }), ...(a.reason === undefined ? {} : { reason: a.reason }) };
        const run = (): Promise<string> => {
          if (a.action === 'run_now') return this.admin.runNow(id, who);
          if (a.action === 'delete') return this.admin.deleteJob(id, who);
          const runAt = a.runAt === undefined ? {} : { runAt: new Date(Date.now() + (a.runAt as { inMs: number }).inMs) };
          return this.admin.reschedule(id, { ...runAt, ...(a.priority === undefined ? {} : { priority: a.priority }), ...who });
        };
        const answer = await run().then((status) => ({ status }), (error: unknown) => ({ error }));
        if (a.expectError) {
          if (!('error' in answer)) throw new Error(`expected ${JSON.stringify(a.expectError)}, got ${answer.status}`);
          this.expectError(answer.error, a.expectError);
        } else if ('error' in answer) throw answer.error;
        else expect(answer.status).toBe(a.expect);
        return;
      }
      case 'bulk_action': {
        // `jobs` in the filter are scenario job names; every other key is the wire filter as written.
        const { jobs: names, ...rest } = (a.filter ?? {}) as { jobs?: string[] } & Record<string, unknown>;
        const filter = { ...rest, ...(names === undefined ? {} : { jobIds: names.map((n) => this.id(n)) }) };
        const opts = { dryRun: a.dryRun ?? false, ...(a.limit === undefined ? {} : { limit: a.limit }), ...(a.actor === undefined ? {} : { actor: a.actor }), ...(a.reason === undefined ? {} : { reason: a.reason }) };
        const call = a.action === 'cancel' ? this.admin.cancelMatching(filter, opts) : a.action === 'run_now' ? this.admin.runNowMatching(filter, opts) : this.admin.deleteMatching(filter, opts);
        const answer = await call.then((result) => ({ result }), (error: unknown) => ({ error }));
        if (a.expectError) {
          if (!('error' in answer)) throw new Error(`expected ${JSON.stringify(a.expectError)}, got ${JSON.stringify(answer.result)}`);
          this.expectError(answer.error, a.expectError);
          return;
        }
        if ('error' in answer) throw answer.error;
        const got = answer.result;
        const want = a.expect as Record<string, unknown>;
        for (const key of ['matched', 'changed', 'more', 'busy', 'outcomes', 'skipped'] as const) if (key in want) expect(got[key]).toEqual(want[key]);
        const named = (ids: string[]) => ids.map((id) => [...this.jobs].find(([, v]) => v === id)?.[0] ?? id).sort();
        if (want.jobs) expect(named(got.jobIds)).toEqual([...(want.jobs as string[])].sort());
        if (want.sample) expect(named(got.sample.map((s) => s.id))).toEqual([...(want.sample as string[])].sort());
        return;
      }
      case 'expect_job_count':
        expect((await this.admin.listJobs({ queue: a.queue, limit: 1000 })).items).toHaveLength(a.count);
        return;
      case 'operator_call': {
        let error: unknown = null;
        try {
          await this.operatorCall(a.call as string, a.args as Record<string, never>);
        } catch (thrown) {
          error = thrown;
        }
        if (!a.expectError) {
          expect(error).toBeNull();
          return;
        }
        if (error === null) throw new Error(`expected ${JSON.stringify(a.expectError)}, ${a.call} succeeded`);
        this.expectError(error, a.expectError);
        return;
      }
      default:
        throw new Error(`unknown action ${action.do}`);
    }
  }
}

describe('conformance scenarios (sdk/conformance)', () => {
  it('finds the scenarios', () => {
    expect(SCENARIOS.length).toBeGreaterThanOrEqual(12);
    for (const { file, scenario } of SCENARIOS) expect(file).toBe(`${file.slice(0, 3)}-${scenario.name}.json`);
  });

  it.each(SCENARIOS.map(({ file, scenario }) => [file, scenario] as const))('%s', async (_file, scenario) => {
    const db = await createTestDatabase();
    const run = new Run(scenario, db);
    try {
      for (const [i, action] of scenario.actions.entries()) {
        try {
          await run.act(action);
        } catch (error) {
          (error as Error).message = `action ${i} ${JSON.stringify(action).slice(0, 200)}: ${(error as Error).message}`;
          throw error;
        }
      }
      await expectSplitInvariant(db.pool);
    } finally {
      await run.stopAll();
      await db.drop();
    }
  });
});
