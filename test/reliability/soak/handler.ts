/**
 * The job handlers of the crash tests (failpoints.test.ts) and the soak (run.ts), shared by the
 * worker child processes (worker.ts) and the in-process workers of the tests, so that a job a
 * child started and a job another worker finishes run the very same code.
 *
 * Every handler invocation leaves a row in `soak_handler_run` (written on its own, so it
 * survives whatever happens next), and every stage that really executes leaves a row in
 * `soak_side_effect` with a fresh token that the stage also returns. A replayed checkpoint
 * returns the stored token without writing a row, so the tables tell runs, executions and
 * replays apart after the fact, across processes.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { HandlerContext, Queryable, Worker } from '../../../lib/core';
import { failpoint } from '../../../lib/core/failpoints';

/** Checkpointed stages on autocommit writes: each stage commits on its own. */
export const SOAK_TYPE = 'soak.job';
/**
 * The same stages through `ctx.client`, the transaction that also records the completion: the
 * stages' rows and checkpoints commit with the job's success, or not at all.
 */
export const SOAK_TX_TYPE = 'soak.tx';

export interface SoakPayload {
  /** The job's number in its run, for reading reports. */
  n: number;
  /** Checkpointed stages, 1 or 2 (default 2); the `inside-handler` failpoint follows the first. */
  stages?: 1 | 2;
  /**
   * Fail the first attempt that reaches the end (at most once per job). Only for
   * {@link SOAK_TYPE}: the marker is a checkpoint, which a transactional handler's failure rolls
   * back, so there it would fail every attempt.
   */
  failOnce?: boolean;
  /** Each executed stage sleeps a random 0..maxDelayMs ms after its write. */
  maxDelayMs?: number;
}

export interface StageValue {
  token: string;
  attempt: number;
}

export interface SoakResult {
  n: number;
  /** The value of each stage by its name (`stage-1`, `stage-2`), as executed or replayed. */
  stages: Record<string, StageValue>;
  attempt: number;
}

/** The side-effect tables; run once per database before any worker starts. */
export const SOAK_TABLES_SQL = `
  CREATE TABLE public.soak_handler_run (
    id bigserial PRIMARY KEY,
    job_id uuid NOT NULL,
    attempt integer NOT NULL,
    worker_id text NOT NULL,
    pid integer NOT NULL
  );
  CREATE TABLE public.soak_side_effect (
    id bigserial PRIMARY KEY,
    job_id uuid NOT NULL,
    stage text NOT NULL,
    attempt integer NOT NULL,
    worker_id text NOT NULL,
    token uuid NOT NULL UNIQUE
  );`;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function soakHandler(pool: Pool) {
  return async (payload: SoakPayload, ctx: HandlerContext): Promise<SoakResult> => {
    await pool.query('INSERT INTO public.soak_handler_run (job_id, attempt, worker_id, pid) VALUES ($1, $2, $3, $4)', [
      ctx.jobId,
      ctx.attempt,
      ctx.workerId,
      process.pid,
    ]);
    // In a transactional handler the stages write through the job's own transaction.
    const writer: Queryable = ctx.client ?? pool;
    const stage = (name: string) =>
      ctx.checkpoint<StageValue>(name, async () => {
        const token = randomUUID();
        await writer.query(
          'INSERT INTO public.soak_side_effect (job_id, stage, attempt, worker_id, token) VALUES ($1, $2, $3, $4, $5)',
          [ctx.jobId, name, ctx.attempt, ctx.workerId, token],
        );
        if (payload.maxDelayMs) await sleep(Math.floor(Math.random() * (payload.maxDelayMs + 1)));
        return { token, attempt: ctx.attempt };
      });

    const stages: Record<string, StageValue> = {};
    stages['stage-1'] = await stage('stage-1');
    failpoint('inside-handler');
    if ((payload.stages ?? 2) === 2) stages['stage-2'] = await stage('stage-2');
    if (payload.failOnce) {
      // The attempt that first gets here is stored; only that attempt fails. A crash between
      // storing it and recording the failure leaves a job that never fails: at most once.
      const failingAttempt = await ctx.checkpoint('planned-failure', () => ctx.attempt);
      if (failingAttempt === ctx.attempt) throw new Error(`planned failure of job ${payload.n}`);
    }
    return { n: payload.n, stages, attempt: ctx.attempt };
  };
}

/** Registers {@link SOAK_TYPE} and {@link SOAK_TX_TYPE} on a worker. */
export function registerSoakHandlers(worker: Worker, pool: Pool): Worker {
  const handler = soakHandler(pool);
  return worker.handle(SOAK_TYPE, handler).handle(SOAK_TX_TYPE, handler, { transactional: true });
}
